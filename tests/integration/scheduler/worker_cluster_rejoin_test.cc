// The worker's Cluster over a real dtrain-scheduler when a peer worker (a fake_node
// process) dies: it learns the death from the heartbeat answers, may keep waiting
// within --rejoin-timeout, learns the comeback, and a replacement is told it rejoined.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "services/worker/scheduler_cluster.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace dtrain::testing {
namespace {

using worker::JoinOptions;
using worker::SchedulerCluster;

constexpr absl::Duration kTimeout = absl::Seconds(20);

JoinOptions Options(const std::string& scheduler, int rank, absl::Duration rejoin_timeout) {
  JoinOptions o;
  o.scheduler = scheduler;
  o.num_workers = 2;
  o.num_servers = 0;
  o.requested_rank = rank;
  o.register_timeout = kTimeout;
  o.heartbeat_interval = absl::Milliseconds(100);
  o.rejoin_timeout = rejoin_timeout;
  o.rejoin_log_every = absl::Seconds(1);
  return o;
}

// Worker 1 is a fake_node process that SIGKILLs itself after step 3.
std::unique_ptr<Subprocess> DyingWorker1(const std::string& scheduler) {
  return std::make_unique<Subprocess>(
      std::vector<std::string>{FAKE_NODE_PATH, "--role", "worker", "--steps", "1000", "--step-ms", "20"},
      std::map<std::string, std::string>{{"DTRAIN_SCHEDULER_ADDR", scheduler},
                                         {"DTRAIN_NUM_WORKERS", "2"},
                                         {"DTRAIN_NUM_SERVERS", "0"},
                                         {"DTRAIN_RANK", "1"},
                                         {"DTRAIN_HEARTBEAT_INTERVAL", "0.1"},
                                         {"FAKE_NODE_KILL", "worker:1:3"}});
}

TEST(WorkerClusterRejoinTest, ADeadPeerIsWaitedForThenItsReplacementRejoins) {
  SchedulerProcess sched(2, 0, {"--heartbeat-timeout", "1", "--rejoin-timeout", "30"});
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  auto worker1 = DyingWorker1(sched.address);
  auto joined = SchedulerCluster::Join(Options(sched.address, 0, absl::Seconds(30)));
  ASSERT_TRUE(joined.ok()) << joined.status() << worker1->output();
  SchedulerCluster& c0 = **joined;
  EXPECT_FALSE(c0.rejoined());
  EXPECT_EQ(worker1->Wait(kTimeout), 128 + 9) << worker1->output();

  ASSERT_TRUE(Eventually([&] { return !c0.DeadPeers().empty(); }, kTimeout))
      << "worker 0 never heard that worker 1 died\n" << sched.process->output();
  EXPECT_EQ(c0.DeadPeers()[0].rank, 1);
  EXPECT_EQ(c0.DeadPeers()[0].reason, "heartbeat stream broke");
  EXPECT_LT(absl::Now() - c0.DeadPeers()[0].since, absl::Seconds(10));
  auto extend = c0.ExtendWaitForRejoin();
  ASSERT_TRUE(extend.ok()) << extend.status();
  EXPECT_TRUE(*extend) << "worker 1 may still rejoin: the wait must go on";
  EXPECT_TRUE(c0.JobStatus().ok()) << c0.JobStatus();

  // The replacement takes rank 1 as incarnation 2 and is told it rejoined.
  auto replacement = SchedulerCluster::Join(Options(sched.address, 1, absl::Seconds(30)));
  ASSERT_TRUE(replacement.ok()) << replacement.status() << sched.process->output();
  EXPECT_TRUE((*replacement)->rejoined());
  EXPECT_EQ((*replacement)->incarnation(), 2u);
  EXPECT_TRUE(Eventually([&] { return c0.DeadPeers().empty(); }, kTimeout))
      << "worker 0 never heard that worker 1 rejoined\n" << sched.process->output();
  extend = c0.ExtendWaitForRejoin();
  ASSERT_TRUE(extend.ok());
  EXPECT_FALSE(*extend);

  EXPECT_TRUE(c0.Finish(false, "").ok());
  EXPECT_TRUE((*replacement)->Finish(false, "").ok());
  EXPECT_EQ(sched.process->Wait(kTimeout), 0) << sched.process->output();
}

// --rejoin-timeout 0 on the worker: a peer's death stops this worker at once, naming it.
TEST(WorkerClusterRejoinTest, RejoinTimeoutZeroFailsAtOnceNamingTheDeadPeer) {
  SchedulerProcess sched(2, 0, {"--heartbeat-timeout", "1", "--rejoin-timeout", "30"});
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  auto worker1 = DyingWorker1(sched.address);
  auto joined = SchedulerCluster::Join(Options(sched.address, 0, absl::ZeroDuration()));
  ASSERT_TRUE(joined.ok()) << joined.status() << worker1->output();
  SchedulerCluster& c0 = **joined;
  ASSERT_TRUE(Eventually([&] { return !c0.JobStatus().ok(); }, kTimeout))
      << "worker 0 kept going after worker 1 died\n" << worker1->output() << sched.process->output();
  EXPECT_EQ(c0.JobStatus().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(c0.JobStatus().message(), "worker 1 died (heartbeat stream broke) and --rejoin-timeout is 0");
  auto extend = c0.ExtendWaitForRejoin();
  EXPECT_EQ(extend.status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace dtrain::testing
