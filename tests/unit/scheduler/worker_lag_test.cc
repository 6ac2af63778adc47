// The worker lag from steps of one moment, and the clock-independent
// sampling the workers do (common/step_history.h).
#include "services/scheduler/worker_lag.h"

#include "common/step_history.h"
#include "gtest/gtest.h"

namespace dtrain::scheduler {
namespace {

v1::NodeInfo Worker(int rank, v1::NodeState state) {
  v1::NodeInfo n;
  n.set_role(v1::ROLE_WORKER);
  n.set_rank(rank);
  n.set_state(state);
  return n;
}

TEST(WorkerLagTest, ComparesStepsOfTheNewestTickEveryWorkerReported) {
  WorkerLagTracker t;
  // dist_sync at 20 steps/s: the latest reports are 900 ms apart (18 steps), but at
  // each tick the workers are at most one step apart.
  t.Record(0, 1000, 20);
  t.Record(1, 1000, 19);
  t.Record(0, 2000, 40);
  t.Record(1, 2000, 40);
  t.Record(0, 3000, 60);  // worker 1's tick 3000 not in yet
  auto lag = t.Lag({0, 1});
  ASSERT_TRUE(lag.has_value());
  EXPECT_EQ(lag->at_unix_ms(), 2000);
  EXPECT_EQ(lag->steps(), 0);
  t.Record(1, 3000, 59);
  lag = t.Lag({0, 1});
  ASSERT_TRUE(lag.has_value());
  EXPECT_EQ(lag->at_unix_ms(), 3000);
  EXPECT_EQ(lag->steps(), 1);
  EXPECT_EQ(lag->slowest_step(), 59);
  EXPECT_EQ(lag->slowest_rank(), 1);
  EXPECT_EQ(lag->fastest_step(), 60);
}

TEST(WorkerLagTest, NoCommonTickNoLag) {
  WorkerLagTracker t;
  EXPECT_FALSE(t.Lag({}).has_value());
  EXPECT_FALSE(t.Lag({0}).has_value());
  t.Record(0, 1000, 5);
  t.Record(1, 2000, 5);
  t.Record(1, 0, 7);  // not a tick: ignored
  EXPECT_FALSE(t.Lag({0, 1}).has_value());
  EXPECT_TRUE(t.Lag({0}).has_value());
}

TEST(WorkerLagTest, KeepsABoundedNumberOfTicks) {
  WorkerLagTracker t;
  for (int64_t i = 1; i <= 100; ++i) t.Record(0, i * 1000, i);
  t.Record(1, 1000, 1);  // long gone from worker 0's ticks
  EXPECT_FALSE(t.Lag({0, 1}).has_value());
  t.Record(1, 100000, 100);
  EXPECT_EQ(t.Lag({0, 1})->steps(), 0);
}

TEST(WorkerLagTest, OnlyWorkersInTheJobCount) {
  EXPECT_EQ(WorkersInJob({Worker(0, v1::NODE_STATE_ALIVE), Worker(1, v1::NODE_STATE_DEAD),
                          Worker(2, v1::NODE_STATE_REJOINING), Worker(3, v1::NODE_STATE_FINISHED)}),
            (std::vector<int>{0, 2}));
}

TEST(StepHistoryTest, GivesTheStepOfAMomentJustPast) {
  StepHistory h;
  EXPECT_FALSE(h.StepAt(1000).has_value());
  h.Set(1, 900);
  h.Set(2, 950);
  h.Set(2, 990);  // a repeat: the step has been 2 since 950
  h.Set(3, 1010);
  EXPECT_EQ(h.StepAt(1000), 2);
  EXPECT_EQ(h.StepAt(1010), 3);
  EXPECT_EQ(h.StepAt(950), 2);
  EXPECT_FALSE(h.StepAt(800).has_value());
  for (int64_t s = 4; s < 1000; ++s) h.Set(s, 1000 + s);
  EXPECT_FALSE(h.StepAt(1010).has_value()) << "older than what is kept";
  EXPECT_EQ(h.StepAt(5000), 999);
}

}  // namespace
}  // namespace dtrain::scheduler
