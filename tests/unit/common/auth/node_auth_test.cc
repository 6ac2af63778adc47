// What the services' checks decide from a caller's certificate name and token.
#include "common/auth/node_auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtrain::auth {
namespace {

using ::testing::HasSubstr;

Caller With(const char* cn, std::optional<TokenClaims> token = std::nullopt, absl::Status token_error = {}) {
  Caller c;
  c.peer = "ipv4:127.0.0.1:5";
  c.identity = IdentityFromCommonName(cn);
  c.token = std::move(token);
  c.token_error = token_error;
  return c;
}

TEST(NodeAuthTest, ANodeActsOnlyAsTheRankAndIncarnationOfItsToken) {
  const Caller w1 = With("worker-1.job", TokenClaims{Role::kWorker, 1, 2});
  EXPECT_TRUE(RequireNode(w1, Role::kWorker, 1, 2, "Leave").ok());
  absl::Status other = RequireNode(w1, Role::kWorker, 0, 2, "Leave");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other.message(),
            "Leave refused: certificate worker-1.job holding a token of worker 1 incarnation 2 may not act as worker 0 "
            "incarnation 2");
  EXPECT_EQ(RequireNode(w1, Role::kWorker, 1, 1, "Leave").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(RequireNode(w1, Role::kWorker, 1, 0, "Leave").code(), absl::StatusCode::kPermissionDenied)
      << "incarnation 0 (\"whoever holds it\") matches no token";
  EXPECT_EQ(RequireNode(w1, Role::kServer, 1, 2, "heartbeat").code(), absl::StatusCode::kPermissionDenied);
}

TEST(NodeAuthTest, NoTokenOrABadOneIsUnauthenticatedSayingWhy) {
  absl::Status none = RequireNode(With("worker-1.job"), Role::kWorker, 1, 1, "Leave");
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(none.message(), HasSubstr("sent no node token"));
  absl::Status bad = RequireNode(
      With("worker-1.job", std::nullopt, absl::UnauthenticatedError("node token not issued by this job's scheduler")),
      Role::kWorker, 1, 1, "Leave");
  EXPECT_EQ(bad.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(bad.message(), HasSubstr("not issued by this job's scheduler"));
}

TEST(NodeAuthTest, ReadersAreNodesWithTokensOperatorsAndTheSchedulersOwnCertificate) {
  EXPECT_TRUE(RequireReader(With("operator.job"), "GetStatus").ok());
  EXPECT_TRUE(RequireReader(With("scheduler.job"), "GetStatus").ok());
  EXPECT_TRUE(RequireReader(With("scheduler-0.job"), "GetStatus").ok());
  EXPECT_TRUE(RequireReader(With("node.job"), "GetStatus").ok());
  EXPECT_TRUE(RequireReader(With("server-0.job", TokenClaims{Role::kServer, 0, 1}), "GetStatus").ok());
  for (const char* cn : {"server-0.job", "worker.job", "client.job", "infer.job", ""}) {
    absl::Status s = RequireReader(With(cn), "GetStatus");
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << cn;
    EXPECT_THAT(s.message(), HasSubstr("operator")) << cn;
  }
}

TEST(NodeAuthTest, SetupCallsTakeOnlyTheTokensTheRuleAllows) {
  auto worker0_or_server = [](const TokenClaims& t) { return t.role == Role::kServer || t.rank == 0; };
  EXPECT_TRUE(RequireAnyOf(With("worker-0.j", TokenClaims{Role::kWorker, 0, 1}), "Configure", worker0_or_server).ok());
  EXPECT_TRUE(RequireAnyOf(With("server-2.j", TokenClaims{Role::kServer, 2, 1}), "Configure", worker0_or_server).ok());
  EXPECT_EQ(RequireAnyOf(With("worker-1.j", TokenClaims{Role::kWorker, 1, 1}), "Configure", worker0_or_server).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(RequireAnyOf(With("operator.j"), "Configure", worker0_or_server).code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace dtrain::auth
