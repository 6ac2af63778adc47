// SIGTERM to a worker of an elastic job asks the scheduler to let it leave; a refusal
// leaves it training.
#include "services/worker/leave_on_signal.h"

#include "gtest/gtest.h"
#include "tests/unit/worker/fake_cluster_elastic.h"

namespace dtrain::worker {
namespace {

using testing::FakeClusterElastic;
using testing::MakeMembership;

// Until the signal's thread asked (or 10 s).
void AwaitLeaves(const FakeClusterElastic& cluster, size_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (cluster.leaves().size() < n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
}

TEST(LeaveOnSignalTest, ASignalAnnouncesTheLeaveOnce) {
  ShutdownSignal signal;
  FakeClusterElastic cluster(MakeMembership(1, 4, {{0, {0, 1}}}));
  LeaveOnSignal leave(signal, cluster);
  signal.Request("SIGTERM");
  AwaitLeaves(cluster, 1);
  ASSERT_EQ(cluster.leaves().size(), 1u);
  EXPECT_EQ(cluster.leaves()[0], "SIGTERM");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!leave.leaving() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(leave.leaving());
}

TEST(LeaveOnSignalTest, ARefusedLeaveLeavesTheWorkerTraining) {
  ShutdownSignal signal;
  FakeClusterElastic cluster(MakeMembership(1, 4, {{0, {0, 1}}}));
  cluster.SetLeaveAnswer(absl::FailedPreconditionError("2 workers would remain of --elastic 3:4's MIN 3"));
  {
    LeaveOnSignal leave(signal, cluster);
    signal.Request("SIGTERM");
    AwaitLeaves(cluster, 1);
    EXPECT_FALSE(leave.leaving());
  }
  EXPECT_EQ(cluster.leaves().size(), 1u);
}

TEST(LeaveOnSignalTest, NoSignalNoLeave) {
  ShutdownSignal signal;
  FakeClusterElastic cluster(MakeMembership(1, 4, {{0, {0, 1}}}));
  { LeaveOnSignal leave(signal, cluster); }
  EXPECT_TRUE(cluster.leaves().empty());
}

}  // namespace
}  // namespace dtrain::worker
