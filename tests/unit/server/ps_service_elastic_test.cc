// An elastic job's parameter server on loopback (loopback.h) with real PsClients: the
// real PsService wired with a ServerMembership (PsServiceOptions::membership), as
// dtrain-server wires it once registered.
#include <memory>
#include <vector>

#include "common/elastic/membership_proto.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/server/ps_service.h"
#include "services/server/server_membership.h"
#include "tests/unit/server/loopback.h"

namespace dtrain::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --elastic 2:4 with workers {0,1}.
std::unique_ptr<ServerMembership> Membership() {
  elastic::ElasticSpec bounds;
  bounds.min_workers = 2;
  bounds.max_workers = 4;
  return std::make_unique<ServerMembership>(bounds);
}

PsServiceOptions Options(ServerMembership* membership) {
  PsServiceOptions options;
  options.membership = membership;
  return options;
}

TEST(PsServiceElasticTest, PushesOverTheWirePassTheMembershipGate) {
  std::unique_ptr<ServerMembership> membership = Membership();
  Loopback ps(Options(membership.get()));
  ASSERT_TRUE(ps.ok());
  elastic::Membership m;
  m.schedule = *elastic::MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  m.lr = elastic::ElasticLr::kKeep;
  m.workers_at_start = 2;
  ASSERT_TRUE(membership->Adopt(elastic::MembershipToProto(m), &ps.store_).ok());
  auto w0 = ps.Connect(0);
  auto w1 = ps.Connect(1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(0.5), kRpc).ok());
  kv::StoreConfig config;
  ASSERT_TRUE(ps.store_.GetConfig(&config));
  EXPECT_EQ(config.num_workers, 4);  // the ranks' bound, not worker 0's -n
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2})}, kRpc).ok());

  const float g0[2] = {1, 2};
  const float g1[2] = {3, 2};
  float out0[2] = {}, out1[2] = {};
  const auto t0 = w0->Submit(worker::KeyRequest::PushPull(0, 5, g0, out0, 2));
  const auto t1 = w1->Submit(worker::KeyRequest::PushPull(0, 5, g1, out1, 2));
  ASSERT_TRUE(w0->Wait(t0, Soon()).ok());
  ASSERT_TRUE(w1->Wait(t1, Soon()).ok());
  EXPECT_THAT(out0, ElementsAre(0, 1));  // {1, 2} - 0.5 * {2, 2}
  EXPECT_THAT(out1, ElementsAre(0, 1));

  // Worker 2 joins from step 1: a push of step 1 still tagged generation 0 (what an
  // older worker sends) is refused ABORTED, and nothing of it reaches the store.
  elastic::MembershipGate* gate = membership->gate();
  ASSERT_NE(gate, nullptr);
  ASSERT_TRUE(gate->Propose(1).ok());
  ASSERT_TRUE(gate->Commit(1, {1, {0, 1, 2}}).ok());
  const absl::Status s = w0->Wait(w0->Submit(worker::KeyRequest::PushPull(1, 5, g0, out0, 2)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("membership changed from step 1: generation 1, workers {0,1,2}"));
  std::vector<kv::KeyVersion> v;
  ASSERT_TRUE(ps.store_.Versions({5}, 0, &v).ok());
  EXPECT_EQ(v.at(0).version, 1);
  EXPECT_EQ(v.at(0).last_push_step, 0);
}

}  // namespace
}  // namespace dtrain::server
