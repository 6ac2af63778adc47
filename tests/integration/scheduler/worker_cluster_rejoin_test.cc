// The worker's Cluster over a real dtrain-scheduler when a peer worker (a fake_node
// process) dies: it learns the death from the heartbeat answers, may keep waiting
// within --rejoin-timeout, learns the comeback, and a replacement is told it rejoined.
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "services/worker/scheduler_cluster.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace dtrain::testing {
namespace {

using worker::Cluster;
using worker::ClusterRecovery;
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
      << "worker 0 never heard that worker 1 died\n"
      << sched.process->output();
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
  // As the trainer and DistKVStore see it: through the Cluster's recovery part.
  ClusterRecovery* back = static_cast<Cluster&>(**replacement).recovery();
  ASSERT_NE(back, nullptr) << "a scheduler's cluster has a recovery part";
  EXPECT_TRUE(back->rejoined());
  EXPECT_EQ(back->incarnation(), 2u);
  EXPECT_TRUE(Eventually([&] { return c0.DeadPeers().empty(); }, kTimeout))
      << "worker 0 never heard that worker 1 rejoined\n"
      << sched.process->output();
  extend = c0.ExtendWaitForRejoin();
  ASSERT_TRUE(extend.ok());
  EXPECT_FALSE(*extend);

  EXPECT_TRUE(c0.Finish(false, "").ok());
  EXPECT_TRUE((*replacement)->Finish(false, "").ok());
  EXPECT_EQ(sched.process->Wait(kTimeout), 0) << sched.process->output();
}

// A replacement goes through the barriers its predecessor passed ("kvstore-init" at
// once), and its heartbeats say "resuming" while it catches up: REJOINING, then ALIVE.
TEST(WorkerClusterRejoinTest, ReplacementPassesItsPredecessorsBarriersAndShowsRejoiningWhileResuming) {
  // The death below is a broken stream (seen at once); the long heartbeat timeout lets
  // the replacement heartbeat rarely.
  SchedulerProcess sched(2, 0, {"--heartbeat-timeout", "30", "--rejoin-timeout", "30"});
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  absl::StatusOr<std::unique_ptr<SchedulerCluster>> first1;
  std::thread t([&] { first1 = SchedulerCluster::Join(Options(sched.address, 1, absl::Seconds(30))); });
  auto joined = SchedulerCluster::Join(Options(sched.address, 0, absl::Seconds(30)));
  t.join();
  ASSERT_TRUE(joined.ok() && first1.ok()) << joined.status() << first1.status() << sched.process->output();
  SchedulerCluster& c0 = **joined;
  absl::Status b0;
  t = std::thread([&] { b0 = c0.Barrier("kvstore-init", kTimeout); });
  EXPECT_TRUE((*first1)->Barrier("kvstore-init", kTimeout).ok());
  t.join();
  ASSERT_TRUE(b0.ok()) << b0;

  // Worker 1 dies (its stream ends without Leave) and a new process takes rank 1. Its
  // heartbeat stream must be open first, or there is no stream to break and only the
  // 30 s heartbeat timeout would tell (a loaded machine can delay the stream's start).
  SchedulerClient observer(sched.address);
  const int64_t joined_ms = absl::ToUnixMillis(absl::Now());
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = FindNode(observer, v1::ROLE_WORKER, 1);
        return n && n->last_heard_unix_ms() > joined_ms;
      },
      kTimeout))
      << "worker 1's heartbeats never reached the scheduler\n"
      << sched.process->output();
  first1->reset();
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = FindNode(observer, v1::ROLE_WORKER, 1);
        return n && n->state() == v1::NODE_STATE_DEAD;
      },
      kTimeout))
      << sched.process->output();
  JoinOptions slow = Options(sched.address, 1, absl::Seconds(30));
  // Heartbeats far apart: SetResuming must reach the scheduler at once, not at the next one.
  slow.heartbeat_interval = absl::Seconds(15);
  auto replacement = SchedulerCluster::Join(slow);
  ASSERT_TRUE(replacement.ok()) << replacement.status() << sched.process->output();
  ASSERT_TRUE((*replacement)->rejoined());
  (*replacement)->SetResuming(true);
  auto state_is = [&](v1::NodeState want) {
    return Eventually(
        [&] {
          auto n = FindNode(observer, v1::ROLE_WORKER, 1);
          return n && n->state() == want && n->incarnation() == 2;
        },
        absl::Seconds(5));
  };
  EXPECT_TRUE(state_is(v1::NODE_STATE_REJOINING)) << sched.process->output();
  auto n = FindNode(observer, v1::ROLE_WORKER, 1);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->restarts(), 1);

  // Its predecessor passed round 0 of "kvstore-init": the replacement passes at once.
  const absl::Time start = absl::Now();
  EXPECT_TRUE((*replacement)->Barrier("kvstore-init", absl::Seconds(5)).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(absl::StrContains(sched.process->output(),
                                "barrier 'kvstore-init': worker 1 incarnation 2 passes round 0, passed by "
                                "incarnation 1"))
      << sched.process->output();
  // The next round is new to both: it waits for worker 0 as usual.
  absl::Status b1;
  t = std::thread([&] { b1 = (*replacement)->Barrier("kvstore-init", kTimeout); });
  EXPECT_TRUE(c0.Barrier("kvstore-init", kTimeout).ok());
  t.join();
  EXPECT_TRUE(b1.ok()) << b1;

  (*replacement)->SetResuming(false);
  EXPECT_TRUE(state_is(v1::NODE_STATE_ALIVE)) << sched.process->output();

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
      << "worker 0 kept going after worker 1 died\n"
      << worker1->output() << sched.process->output();
  EXPECT_EQ(c0.JobStatus().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(c0.JobStatus().message(), "worker 1 died (heartbeat stream broke) and --rejoin-timeout is 0");
  auto extend = c0.ExtendWaitForRejoin();
  EXPECT_EQ(extend.status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace dtrain::testing
