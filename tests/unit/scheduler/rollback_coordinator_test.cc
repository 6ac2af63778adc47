// The scheduler's rollback rules: a server replaced by a new incarnation
// lost its shard; once every server listed its snapshots, S is the newest step all
// of them hold; servers get the order until they acknowledge, workers only after all
// did; no step in common, or servers that do not reload in time, fail the job.
#include "services/scheduler/rollback_coordinator.h"

#include <initializer_list>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::scheduler {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

v1::SnapshotReport Report(std::initializer_list<int64_t> steps, uint64_t done = 0, bool listed = true) {
  v1::SnapshotReport r;
  r.set_listed(listed);
  for (int64_t s : steps) r.add_complete_steps(s);
  r.set_rollback_done(done);
  return r;
}

TEST(RollbackCoordinatorTest, AReplacedServerRollsTheJobBackToTheNewestCommonStep) {
  RollbackCoordinator c(2, absl::Seconds(60));
  EXPECT_FALSE(c.Enabled());
  EXPECT_FALSE(c.OnServerHeartbeat(0, 1, Report({800, 750}), 790, kT0));
  EXPECT_FALSE(c.OnServerHeartbeat(1, 1, Report({800, 750}), 790, kT0));
  EXPECT_TRUE(c.Enabled());
  EXPECT_EQ(c.SnapshotSteps(1), (std::vector<int64_t>{800, 750}));
  // Server 0 writes 850; server 1 dies before it and comes back listing what it has.
  EXPECT_FALSE(c.OnServerHeartbeat(0, 1, Report({850, 800}), 812, kT0));
  EXPECT_FALSE(c.OnServerHeartbeat(1, 2, Report({}, 0, /*listed=*/false), 812, kT0)) << "not listed yet";
  std::optional<v1::RollbackOrder> order = c.OnServerHeartbeat(1, 2, Report({800, 750}), 812, kT0);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->generation(), 1u);
  EXPECT_EQ(order->step(), 800);
  EXPECT_EQ(order->reason(), "rolled back from step 812 to step 800: server 1 lost its shard");
  EXPECT_EQ(c.rollbacks(), 1);
  EXPECT_FALSE(c.ForWorkers()) << "workers wait until every server reloaded";
  // Server 0 is told too, until it acknowledges.
  ASSERT_TRUE(c.OnServerHeartbeat(0, 1, Report({850, 800}), 812, kT0));
  EXPECT_FALSE(c.OnServerHeartbeat(0, 1, Report({800}, 1), 812, kT0));
  EXPECT_FALSE(c.ForWorkers());
  EXPECT_FALSE(c.OnServerHeartbeat(1, 2, Report({800, 750}, 1), 812, kT0));
  ASSERT_TRUE(c.ForWorkers());
  EXPECT_EQ(c.ForWorkers()->step(), 800);
  c.Check(kT0 + absl::Minutes(5));
  EXPECT_EQ(c.Failure(), "") << "a completed rollback has no deadline left";
}

TEST(RollbackCoordinatorTest, NoStepInCommonFailsTheJobSayingSo) {
  RollbackCoordinator c(2, absl::Seconds(60));
  c.OnServerHeartbeat(0, 1, Report({100}), 120, kT0);
  c.OnServerHeartbeat(1, 1, Report({}), 120, kT0);
  EXPECT_FALSE(c.OnServerHeartbeat(1, 2, Report({}), 120, kT0));
  EXPECT_THAT(c.Failure(), HasSubstr("server 1 lost its shard and the servers have no snapshot step in common"));
  EXPECT_THAT(c.Failure(), HasSubstr("server 0: 100; server 1: none"));
  EXPECT_EQ(c.rollbacks(), 0);
}

TEST(RollbackCoordinatorTest, ServersThatDoNotReloadInTimeFailTheJobNamingThem) {
  RollbackCoordinator c(2, absl::Seconds(60));
  c.OnServerHeartbeat(0, 1, Report({50}), 60, kT0);
  c.OnServerHeartbeat(1, 1, Report({50}), 60, kT0);
  ASSERT_TRUE(c.OnServerHeartbeat(1, 2, Report({50}), 60, kT0));
  c.Check(kT0 + absl::Seconds(30));
  EXPECT_EQ(c.Failure(), "");
  c.Check(kT0 + absl::Seconds(61));
  EXPECT_THAT(c.Failure(), HasSubstr("waiting for server 0 (not reloaded), server 1 (not reloaded)"));
}

// The scheduler restarted in the middle of rollback 3 to step 800: server 1 had
// reloaded, server 0 not yet. The new coordinator takes the order up from server 1's
// report, gives it to server 0, then (TakenUp) to the workers that wait for it.
TEST(RollbackCoordinatorTest, ARestartedCoordinatorTakesUpTheOrderTheServersWereCarryingOut) {
  RollbackCoordinator c(2, absl::Seconds(60));
  v1::SnapshotReport done = Report({800}, 3);
  done.set_rollback_step(800);
  done.set_rollback_reason("rolled back from step 812 to step 800: server 1 lost its shard");
  EXPECT_FALSE(c.OnServerHeartbeat(1, 2, done, 812, kT0)) << "server 1 did it already";
  EXPECT_TRUE(c.TakenUp(3));
  EXPECT_EQ(c.rollbacks(), 3);
  EXPECT_FALSE(c.ForWorkers()) << "server 0 has not reloaded";
  std::optional<v1::RollbackOrder> order = c.OnServerHeartbeat(0, 1, Report({850, 800}, 2), 812, kT0);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->generation(), 3u);
  EXPECT_EQ(order->step(), 800);
  EXPECT_EQ(order->reason(), "rolled back from step 812 to step 800: server 1 lost its shard");
  EXPECT_FALSE(c.OnServerHeartbeat(0, 1, Report({800}, 3), 812, kT0));
  ASSERT_TRUE(c.ForWorkers());
  EXPECT_EQ(c.ForWorkers()->generation(), 3u);
  // The next loss is rollback 4, not 1 again.
  v1::SnapshotReport lost = Report({800});
  lost.set_shard_lost(true);
  EXPECT_FALSE(c.TakenUp(4));
  order = c.OnServerHeartbeat(0, 2, lost, 830, kT0);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->generation(), 4u);
}

// A replacement server that registered at a scheduler which never saw its predecessor
// (both restarted) says its shard is lost; that alone orders the rollback, once.
TEST(RollbackCoordinatorTest, AShardReportedLostIsRolledBackWithoutAnIncarnationChange) {
  RollbackCoordinator c(2, absl::Seconds(60));
  EXPECT_FALSE(c.OnServerHeartbeat(0, 1, Report({100, 50}), 120, kT0));
  v1::SnapshotReport lost = Report({100, 50});
  lost.set_shard_lost(true);
  std::optional<v1::RollbackOrder> order = c.OnServerHeartbeat(1, 2, lost, 120, kT0);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->generation(), 1u);
  EXPECT_EQ(order->step(), 100);
  EXPECT_FALSE(c.TakenUp(1)) << "ordered here";
  // Still lost until it reloads: no second order meanwhile.
  order = c.OnServerHeartbeat(1, 2, lost, 120, kT0);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->generation(), 1u);
  EXPECT_EQ(c.rollbacks(), 1);
}

}  // namespace
}  // namespace dtrain::scheduler
