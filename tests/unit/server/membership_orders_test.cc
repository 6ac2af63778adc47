// MembershipOrders: the scheduler's membership orders carried out on a real
// MembershipGate and ShardStore, once each, and the report every heartbeat sends.
#include "services/server/membership_orders.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtrain::server {
namespace {

using ::testing::HasSubstr;

v1::MembershipOrder Order(v1::MembershipOrder::Phase phase, int generation) {
  v1::MembershipOrder order;
  order.set_phase(phase);
  order.set_generation(generation);
  return order;
}

v1::MembershipOrder Commit(int generation, int64_t from_step, std::vector<int> ranks, bool drop = false) {
  v1::MembershipOrder order = Order(v1::MembershipOrder::PHASE_COMMIT, generation);
  order.mutable_next()->set_from_step(from_step);
  for (int r : ranks) order.mutable_next()->add_ranks(r);
  order.set_drop_pending(drop);
  return order;
}

// --elastic 1:4 with workers {0,1}; a sync store (SGD, lr 1) holding keys 5 (version 3)
// and 6 (version 4).
class MembershipOrdersTest : public ::testing::Test {
 protected:
  MembershipOrdersTest() : gate_(*elastic::MembershipSchedule::Create(1, 4, {{0, {0, 1}}})) {
    store_.SetStepRanks(&gate_);
    kv::StoreConfig c;
    c.num_workers = 4;
    c.optimizer.learning_rate = 1.0;
    EXPECT_TRUE(store_.Configure(c).ok());
    const float init[] = {1.0f};
    EXPECT_TRUE(store_.InitKey(5, {1}, init, 1, 3).ok());
    EXPECT_TRUE(store_.InitKey(6, {1}, init, 1, 4).ok());
  }

  elastic::MembershipGate gate_;
  kv::ShardStore store_;
  int answered_ = 0;
  MembershipOrders orders_{&gate_, &store_, [this] { ++answered_; }};
};

TEST_F(MembershipOrdersTest, BeforeAnyOrderTheReportSaysWhatTheServerHolds) {
  const v1::MembershipReport r = orders_.Report();
  EXPECT_EQ(r.phase(), v1::MembershipOrder::PHASE_UNSPECIFIED);
  EXPECT_EQ(r.highest_step(), -1);
  EXPECT_EQ(r.committed_from(), -1);
  EXPECT_EQ(r.generations_held(), 1);
  EXPECT_EQ(r.min_version(), 3);
  EXPECT_EQ(r.max_version(), 4);
  EXPECT_TRUE(r.error().empty());
}

TEST_F(MembershipOrdersTest, AStoreWithoutKeysReportsNoVersions) {
  kv::ShardStore empty;
  MembershipOrders orders(&gate_, &empty);
  EXPECT_EQ(orders.Report().min_version(), -1);
  EXPECT_EQ(orders.Report().max_version(), -1);
}

TEST_F(MembershipOrdersTest, EachOrderIsCarriedOutOnceAndAnsweredInEveryReport) {
  ASSERT_TRUE(gate_.AdmitPush(3, 0).ok());
  const v1::MembershipOrder propose = Order(v1::MembershipOrder::PHASE_PROPOSE, 1);
  orders_.OnOrder(propose);
  EXPECT_EQ(answered_, 1);
  v1::MembershipReport r = orders_.Report();
  EXPECT_EQ(r.generation(), 1);
  EXPECT_EQ(r.phase(), v1::MembershipOrder::PHASE_PROPOSE);
  EXPECT_EQ(r.highest_step(), 3);
  EXPECT_EQ(r.committed_from(), -1);
  EXPECT_TRUE(r.error().empty()) << r.error();
  ASSERT_TRUE(gate_.AdmitPush(3, 0).ok());
  orders_.OnOrder(propose);  // repeated on the next answer: nothing new
  EXPECT_EQ(answered_, 1);
  EXPECT_EQ(gate_.AdmitPush(4, 0).code(), absl::StatusCode::kUnavailable);  // held by the proposal

  const v1::MembershipOrder commit = Commit(1, 4, {0, 1, 2});
  orders_.OnOrder(commit);
  orders_.OnOrder(commit);
  EXPECT_EQ(answered_, 2);
  r = orders_.Report();
  EXPECT_EQ(r.phase(), v1::MembershipOrder::PHASE_COMMIT);
  EXPECT_EQ(r.committed_from(), 4);
  EXPECT_EQ(r.generations_held(), 2);
  EXPECT_TRUE(r.error().empty()) << r.error();
  EXPECT_EQ(gate_.CountAt(4), 3);
  EXPECT_TRUE(gate_.AdmitPush(4, 1).ok());
}

TEST_F(MembershipOrdersTest, AnOrderThatFailsIsReportedWithWhyAndNotRetried) {
  orders_.OnOrder(Commit(1, 4, {0, 1, 2}));  // never proposed
  v1::MembershipReport r = orders_.Report();
  EXPECT_EQ(r.phase(), v1::MembershipOrder::PHASE_COMMIT);
  EXPECT_THAT(r.error(), HasSubstr("membership generation 1 was not proposed to this server"));
  EXPECT_EQ(r.committed_from(), -1);
  EXPECT_EQ(r.generations_held(), 1);
  // Ranks that break the schedule's rules are refused before the gate sees them.
  orders_.OnOrder(Order(v1::MembershipOrder::PHASE_PROPOSE, 1));
  orders_.OnOrder(Commit(1, 4, {0, 9}));
  r = orders_.Report();
  EXPECT_FALSE(r.error().empty());
  EXPECT_EQ(r.generations_held(), 1);
  // Only the proposal's answer went out early: a failed one waits for the next regular
  // heartbeat, so that orders failing again and again cannot spin.
  EXPECT_EQ(answered_, 1);
}

TEST_F(MembershipOrdersTest, AnAbortLetsHeldPushesGoOn) {
  ASSERT_TRUE(gate_.AdmitPush(3, 0).ok());
  orders_.OnOrder(Order(v1::MembershipOrder::PHASE_PROPOSE, 1));
  EXPECT_EQ(gate_.AdmitPush(4, 0).code(), absl::StatusCode::kUnavailable);
  orders_.OnOrder(Order(v1::MembershipOrder::PHASE_ABORT, 1));
  EXPECT_TRUE(gate_.AdmitPush(4, 0).ok());
  EXPECT_EQ(orders_.Report().phase(), v1::MembershipOrder::PHASE_ABORT);
  EXPECT_TRUE(orders_.Report().error().empty());
}

TEST_F(MembershipOrdersTest, ADropCommitAnswersTheStepsParkedPullsAbortedAndStartsThere) {
  // Key 6 at version 4: worker 0 pushed step 4 and waits; worker 1 died. Key 5 is
  // brought to version 4 by both first.
  const float g[] = {1.0f};
  for (int w : {0, 1}) ASSERT_TRUE(store_.Push(w, 3, 5, g, 1).ok());
  for (uint64_t key : {5, 6}) ASSERT_TRUE(store_.Push(0, 4, key, g, 1).ok());
  ASSERT_TRUE(gate_.AdmitPush(4, 0).ok());
  absl::Status pulled = absl::UnknownError("not answered");
  store_.Pull(0, 6, 5, absl::InfiniteFuture(),
              [&](const absl::Status& s, int64_t, const float*, int64_t) { pulled = s; });
  EXPECT_EQ(store_.parked_pulls(), 1);
  EXPECT_EQ(orders_.Report().min_version(), 4);
  orders_.OnOrder(Order(v1::MembershipOrder::PHASE_PROPOSE, 1));
  orders_.OnOrder(Commit(1, 4, {0}, /*drop=*/true));
  const v1::MembershipReport r = orders_.Report();
  EXPECT_TRUE(r.error().empty()) << r.error();
  EXPECT_EQ(r.committed_from(), 4);
  EXPECT_EQ(pulled.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(pulled.message(), "membership changed from step 4: generation 1, workers {0}");
  // Worker 0 redoes step 4 alone: its new push merges at once.
  ASSERT_TRUE(gate_.AdmitPush(4, 1).ok());
  ASSERT_TRUE(store_.Push(0, 4, 6, g, 1).ok());
  std::vector<kv::KeyVersion> v;
  ASSERT_TRUE(store_.Versions({6}, -1, &v).ok());
  EXPECT_EQ(v.at(0).version, 5);
}

}  // namespace
}  // namespace dtrain::server
