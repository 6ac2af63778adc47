#include "common/auth/peer_identity.h"

#include <gtest/gtest.h>

namespace dtrain::auth {
namespace {

using Kind = PeerIdentity::Kind;

TEST(PeerIdentityTest, NamesMapToKinds) {
  PeerIdentity w1 = IdentityFromCommonName("worker-1.mnist");
  EXPECT_EQ(w1.kind, Kind::kNode);
  EXPECT_EQ(w1.role, Role::kWorker);
  EXPECT_EQ(w1.rank, 1);
  EXPECT_EQ(w1.name, "worker-1.mnist");

  PeerIdentity any_server = IdentityFromCommonName("server.mnist");
  EXPECT_EQ(any_server.kind, Kind::kNode);
  EXPECT_EQ(any_server.role, Role::kServer);
  EXPECT_EQ(any_server.rank, -1);

  EXPECT_EQ(IdentityFromCommonName("scheduler-0.local").role, Role::kScheduler);
  EXPECT_EQ(IdentityFromCommonName("node.job").kind, Kind::kAnyNode);
  EXPECT_EQ(IdentityFromCommonName("operator.job").kind, Kind::kOperator);
  EXPECT_EQ(IdentityFromCommonName("").kind, Kind::kNone);
  EXPECT_EQ(IdentityFromCommonName("client.job").kind, Kind::kOther);
  EXPECT_EQ(IdentityFromCommonName("infer.job").kind, Kind::kOther);
}

TEST(PeerIdentityTest, LookalikeNamesAreNotNodes) {
  for (const char* cn : {"worker-.job", "worker--1.job", "worker-+1.job", "worker-1x.job", "workers-1.job",
                         "worker-99999999999.job", "wor.ker-1", "-1.job", "operators.job", "nodes.job"}) {
    EXPECT_EQ(IdentityFromCommonName(cn).kind, Kind::kOther) << cn;
  }
}

TEST(PeerIdentityTest, OnlyANodeCertificateNamesARole) {
  for (const char* cn : {"node.job", "operator.job", "client.job", "ps-0.job", "Worker-1.job", ""}) {
    EXPECT_FALSE(IdentityFromCommonName(cn).role.has_value()) << cn;
  }
  EXPECT_EQ(IdentityFromCommonName("server-3.job").role, Role::kServer);
  EXPECT_EQ(IdentityFromCommonName("server-3.job").rank, 3);
}

TEST(PeerIdentityTest, ARankedCertificateRegistersAsItsRankOnly) {
  const PeerIdentity w1 = IdentityFromCommonName("worker-1.job");
  int rank = -1;
  EXPECT_TRUE(MayRegisterAs(w1, Role::kWorker, -1, &rank).ok());
  EXPECT_EQ(rank, 1) << "a node started without a rank gets the one its certificate names";
  rank = 1;
  EXPECT_TRUE(MayRegisterAs(w1, Role::kWorker, 1, &rank).ok());
  absl::Status other_rank = MayRegisterAs(w1, Role::kWorker, 0, &rank);
  EXPECT_EQ(other_rank.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other_rank.message(), "certificate worker-1.job may not register as worker 0");
  EXPECT_EQ(MayRegisterAs(w1, Role::kServer, 1, &rank).code(), absl::StatusCode::kPermissionDenied);
}

TEST(PeerIdentityTest, RoleAndNodeCertificatesLeaveTheRankOpen) {
  int rank = 3;
  EXPECT_TRUE(MayRegisterAs(IdentityFromCommonName("worker.job"), Role::kWorker, 3, &rank).ok());
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(MayRegisterAs(IdentityFromCommonName("worker.job"), Role::kServer, 3, &rank).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(MayRegisterAs(IdentityFromCommonName("node.job"), Role::kServer, -1, &rank).ok());
}

TEST(PeerIdentityTest, OperatorsClientsAndStrangersNeverRegister) {
  int rank = -1;
  for (const char* cn : {"operator.job", "client.job", "infer.job", ""}) {
    absl::Status s = MayRegisterAs(IdentityFromCommonName(cn), Role::kWorker, -1, &rank);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << cn;
  }
  EXPECT_EQ(MayRegisterAs(IdentityFromCommonName(""), Role::kWorker, -1, &rank).message(),
            "no client certificate may not register as a worker");
}

}  // namespace
}  // namespace dtrain::auth
