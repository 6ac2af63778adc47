// Recovery from the client's side (docs/recovery.md): a real dtrain-scheduler is
// SIGKILLed and restarted on the same port while real SchedulerClients (in this
// process, or fake_node processes) run; they register again with their rank and
// incarnation and the job finishes. Also: the scheduler that never comes back, and a
// replacement process that waits out the stale holder of its rank.
#include <signal.h>

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

// A scheduler that can be killed and started again on the same port.
class RestartableScheduler {
 public:
  RestartableScheduler(int workers, int servers, std::vector<std::string> extra)
      : workers_(workers), servers_(servers), extra_(std::move(extra)) {
    Start(0);
  }

  // Starts the scheduler on `port` (0: any); the address stays the first one's.
  void Start(int port) {
    const int bound = StartScheduler(port, workers_, servers_, extra_, &process_);
    port_ = bound;
    if (bound > 0 && address_.empty()) address_ = "127.0.0.1:" + std::to_string(bound);
  }

  // SIGKILL (nothing kept, as a crash or a node loss), then a new one on the same port.
  void KillAndRestart(absl::Duration down_for) {
    const int port = port_;
    process_->Signal(SIGKILL);
    process_->Wait(absl::Seconds(5));
    old_output_ += process_->output();
    absl::SleepFor(down_for);
    Start(port);
  }

  Subprocess& process() { return *process_; }
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  std::string output() { return old_output_ + "--- restarted ---\n" + process_->output(); }

 private:
  const int workers_, servers_;
  const std::vector<std::string> extra_;
  std::unique_ptr<Subprocess> process_;
  std::string address_;
  int port_ = 0;
  std::string old_output_;
};

std::future<absl::StatusOr<v1::RegisterResponse>> RegisterAsync(SchedulerClient& c, v1::Role role, int rank,
                                                                int workers, int servers) {
  return std::async(std::launch::async, [&c, role, rank, workers, servers] {
    return c.Register(role, "127.0.0.1:1", rank, workers, servers, kTimeout);
  });
}

std::optional<v1::NodeInfo> FindNode(SchedulerClient& c, v1::Role role, int rank) {
  auto status = c.GetStatus(absl::Seconds(2));
  if (!status.ok()) return std::nullopt;
  for (const auto& n : status->nodes()) {
    if (n.role() == role && n.rank() == rank) return n;
  }
  return std::nullopt;
}

// Two workers of a running job; the scheduler dies and comes back on its port. Both
// register again (heartbeat stream and barrier), keep their incarnation, and a barrier
// entered across the restart completes.
TEST(SchedulerRestartTest, ClientsRegisterAgainAndABarrierCompletes) {
  RestartableScheduler sched(2, 0, {"--job-id", "job-r", "--heartbeat-timeout", "3"});
  ASSERT_GT(sched.port(), 0) << sched.output();
  SchedulerClient w0(sched.address()), w1(sched.address());
  auto f0 = RegisterAsync(w0, v1::ROLE_WORKER, 0, 2, 0);
  auto f1 = RegisterAsync(w1, v1::ROLE_WORKER, 1, 2, 0);
  auto r0 = f0.get(), r1 = f1.get();
  ASSERT_TRUE(r0.ok() && r1.ok()) << r0.status() << r1.status() << sched.output();
  EXPECT_EQ(w0.job_id(), "job-r");
  std::atomic<bool> shut{false};
  SchedulerClient::HeartbeatHooks hooks;
  hooks.on_shutdown = [&shut](const std::string&) { shut = true; };
  w0.StartHeartbeat(absl::Milliseconds(100), hooks);
  w1.StartHeartbeat(absl::Milliseconds(100), hooks);
  ASSERT_TRUE(Eventually(
      [&] { return FindNode(w0, v1::ROLE_WORKER, 1).value_or(v1::NodeInfo()).state() == v1::NODE_STATE_ALIVE; },
      absl::Seconds(10)));

  // Worker 0 is inside a barrier when the scheduler dies.
  auto b0 = std::async(std::launch::async, [&] { return w0.Barrier("step", v1::BARRIER_GROUP_WORKERS, kTimeout); });
  absl::SleepFor(absl::Milliseconds(300));
  sched.KillAndRestart(absl::Milliseconds(500));
  ASSERT_GT(sched.port(), 0) << "the scheduler did not come back on its port\n" << sched.output();
  absl::Status b1 = w1.Barrier("step", v1::BARRIER_GROUP_WORKERS, kTimeout);
  EXPECT_TRUE(b1.ok()) << b1 << sched.output();
  EXPECT_TRUE(b0.get().ok()) << sched.output();

  // Both are back, with the incarnations they had, and heartbeating.
  EXPECT_EQ(w0.reregistrations(), 1);
  EXPECT_EQ(w1.reregistrations(), 1);
  EXPECT_TRUE(Eventually(
      [&] {
        auto n0 = FindNode(w1, v1::ROLE_WORKER, 0), n1 = FindNode(w1, v1::ROLE_WORKER, 1);
        return n0 && n1 && n0->state() == v1::NODE_STATE_ALIVE && n1->state() == v1::NODE_STATE_ALIVE &&
               n0->incarnation() == w0.incarnation() && n1->incarnation() == w1.incarnation();
      },
      absl::Seconds(10)))
      << "worker 0 or 1 is not ALIVE with its old incarnation at the restarted scheduler\n"
      << sched.output();
  EXPECT_FALSE(shut.load()) << "a scheduler restart ended the job for a client";
  EXPECT_TRUE(w0.Leave(false, "").ok());
  EXPECT_TRUE(w1.Leave(false, "").ok());
  EXPECT_EQ(sched.process().Wait(kTimeout), 0) << sched.output();
  // The restarted scheduler told them to register again: through the heartbeat stream,
  // or through a refused call when the barrier got there first (a race of a few ms).
  EXPECT_TRUE(absl::StrContains(sched.output(), "should register again") ||
              absl::StrContains(sched.output(), "is not registered with this scheduler"))
      << sched.output();
}

// Worker 0 finished and left, then the scheduler died. The restarted scheduler gets
// worker 1 and the server back (with their incarnations) but never worker 0: one
// heartbeat timeout after the first of them, it takes worker 0 as FINISHED and the
// job goes on; when worker 1 leaves the job is over and the server is told so.
TEST(SchedulerRestartTest, AWorkerThatLeftBeforeTheRestartIsTakenAsFinished) {
  RestartableScheduler sched(2, 1, {"--job-id", "job-l", "--heartbeat-timeout", "2"});
  ASSERT_GT(sched.port(), 0) << sched.output();
  auto w0 = std::make_unique<SchedulerClient>(sched.address());
  SchedulerClient w1(sched.address()), s0(sched.address());
  auto f0 = RegisterAsync(*w0, v1::ROLE_WORKER, 0, 2, 1);
  auto f1 = RegisterAsync(w1, v1::ROLE_WORKER, 1, 2, 1);
  auto fs = RegisterAsync(s0, v1::ROLE_SERVER, 0, 2, 1);
  auto r0 = f0.get(), r1 = f1.get(), rs = fs.get();
  ASSERT_TRUE(r0.ok() && r1.ok() && rs.ok()) << r0.status() << r1.status() << rs.status() << sched.output();
  std::atomic<bool> server_told{false};
  SchedulerClient::HeartbeatHooks server_hooks;
  server_hooks.on_shutdown = [&](const std::string&) { server_told = true; };
  w0->StartHeartbeat(absl::Milliseconds(100), {});
  w1.StartHeartbeat(absl::Milliseconds(100), {});
  s0.StartHeartbeat(absl::Milliseconds(100), server_hooks);
  ASSERT_TRUE(w0->Leave(false, "").ok());
  w0.reset();  // the process exits
  ASSERT_TRUE(Eventually(
      [&] { return FindNode(w1, v1::ROLE_WORKER, 0).value_or(v1::NodeInfo()).state() == v1::NODE_STATE_FINISHED; },
      absl::Seconds(10)));

  sched.KillAndRestart(absl::Milliseconds(500));
  ASSERT_GT(sched.port(), 0) << sched.output();
  ASSERT_TRUE(Eventually(
      [&] {
        auto n0 = FindNode(w1, v1::ROLE_WORKER, 0), n1 = FindNode(w1, v1::ROLE_WORKER, 1);
        return n0 && n1 && n0->state() == v1::NODE_STATE_FINISHED && n1->state() == v1::NODE_STATE_ALIVE &&
               n1->incarnation() == w1.incarnation();
      },
      kTimeout))
      << "the restarted scheduler did not take worker 0 as finished\n"
      << sched.output();
  EXPECT_EQ(w1.reregistrations(), 1);
  EXPECT_EQ(s0.reregistrations(), 1);
  EXPECT_TRUE(absl::StrContains(sched.output(), "worker 0 did not register again with this restarted scheduler"))
      << sched.output();
  EXPECT_FALSE(server_told.load()) << "the job ended before worker 1 finished";
  EXPECT_TRUE(w1.Leave(false, "").ok());
  EXPECT_TRUE(Eventually([&] { return server_told.load(); }, kTimeout)) << sched.output();
  EXPECT_FALSE(s0.job_failed());
  EXPECT_FALSE(w1.job_failed());
  EXPECT_TRUE(s0.Leave(false, "").ok());
  EXPECT_EQ(sched.process().Wait(kTimeout), 0) << sched.output();
}

// A scheduler that does not come back: the heartbeat gives up after reconnect_for and
// a barrier after its timeout, each naming the scheduler's address.
TEST(SchedulerRestartTest, ASchedulerThatStaysGoneFailsNamingIt) {
  RestartableScheduler sched(1, 0, {});
  ASSERT_GT(sched.port(), 0) << sched.output();
  SchedulerClient w(sched.address());
  ASSERT_TRUE(w.Register(v1::ROLE_WORKER, "127.0.0.1:1", 0, 1, 0, kTimeout).ok()) << sched.output();
  absl::Mutex mu;
  std::string reason;
  SchedulerClient::HeartbeatHooks hooks;
  hooks.on_shutdown = [&](const std::string& r) {
    absl::MutexLock lock(&mu);
    reason = r;
  };
  hooks.reconnect_for = absl::Seconds(2);
  w.StartHeartbeat(absl::Milliseconds(100), hooks);
  absl::SleepFor(absl::Milliseconds(300));
  sched.process().Signal(SIGKILL);
  ASSERT_NE(sched.process().Wait(absl::Seconds(5)), -1);

  const absl::Time start = absl::Now();
  absl::Status b = w.Barrier("after", v1::BARRIER_GROUP_WORKERS, absl::Seconds(2));
  EXPECT_EQ(b.code(), absl::StatusCode::kUnavailable) << b;
  EXPECT_TRUE(absl::StrContains(b.message(), "barrier 'after': lost the scheduler at " + sched.address())) << b;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1900)) << "the barrier gave up before its timeout: " << b;
  ASSERT_TRUE(Eventually(
      [&] {
        absl::MutexLock lock(&mu);
        return !reason.empty();
      },
      absl::Seconds(10)))
      << "the heartbeat did not give up on the lost scheduler within reconnect_for";
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(absl::StrContains(reason, "lost the scheduler at " + sched.address() + " for 2s")) << reason;
  EXPECT_TRUE(w.job_failed());
}

// A replacement process asks for rank 1 while the stalled old one (SIGSTOPped) still
// holds it ALIVE: its registration retries ALREADY_EXISTS until the scheduler declares
// the old one dead, then takes the rank as incarnation 2, rejoined.
TEST(SchedulerRestartTest, AReplacementWaitsOutTheStaleHolderOfItsRank) {
  RestartableScheduler sched(2, 0, {"--heartbeat-timeout", "1", "--rejoin-timeout", "30"});
  ASSERT_GT(sched.port(), 0) << sched.output();
  std::map<std::string, std::string> env = {{"DTRAIN_SCHEDULER_ADDR", sched.address()},
                                            {"DTRAIN_NUM_WORKERS", "2"},
                                            {"DTRAIN_NUM_SERVERS", "0"},
                                            {"DTRAIN_HEARTBEAT_INTERVAL", "0.1"}};
  auto env1 = env;
  env1["DTRAIN_RANK"] = "1";
  Subprocess old1({FAKE_NODE_PATH, "--role", "worker", "--steps", "1000", "--step-ms", "20"}, env1);
  SchedulerClient w0(sched.address());
  ASSERT_TRUE(w0.Register(v1::ROLE_WORKER, "127.0.0.1:1", 0, 2, 0, kTimeout).ok()) << old1.output();
  w0.StartHeartbeat(absl::Milliseconds(100), {});
  ASSERT_TRUE(old1.WaitForOutput("step=3", kTimeout)) << old1.output();
  ASSERT_TRUE(Eventually(
      [&] { return FindNode(w0, v1::ROLE_WORKER, 1).value_or(v1::NodeInfo()).state() == v1::NODE_STATE_ALIVE; },
      kTimeout))
      << "worker 1 never became ALIVE\n"
      << sched.output();
  old1.Signal(SIGSTOP);

  // Its first attempt meets a live holder (ALREADY_EXISTS), which a duplicate before
  // the job starts would get at once; here it retries until the holder is dead.
  SchedulerClient new1(sched.address());
  auto reg = new1.Register(v1::ROLE_WORKER, "127.0.0.1:2", 1, 2, 0, kTimeout);
  ASSERT_TRUE(reg.ok()) << reg.status() << sched.output();
  EXPECT_EQ(reg->incarnation(), 2u);
  EXPECT_TRUE(reg->rejoined());
  old1.Signal(SIGCONT);
  old1.Signal(SIGKILL);
}

// The whole job with fake nodes (1 server, 2 workers) across a scheduler SIGKILL and
// restart: every node registers again and exits 0, and so does the new scheduler.
TEST(SchedulerRestartTest, AJobOfFakeNodesFinishesAcrossASchedulerRestart) {
  RestartableScheduler sched(2, 1, {"--job-id", "job-f", "--heartbeat-timeout", "3"});
  ASSERT_GT(sched.port(), 0) << sched.output();
  std::map<std::string, std::string> env = {{"DTRAIN_SCHEDULER_ADDR", sched.address()},
                                            {"DTRAIN_NUM_WORKERS", "2"},
                                            {"DTRAIN_NUM_SERVERS", "1"},
                                            {"DTRAIN_HEARTBEAT_INTERVAL", "0.2"}};
  std::vector<std::unique_ptr<Subprocess>> nodes;
  nodes.push_back(std::make_unique<Subprocess>(std::vector<std::string>{FAKE_NODE_PATH, "--role", "server"}, env));
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{FAKE_NODE_PATH, "--role", "worker", "--steps", "30", "--step-ms", "100"}, env));
  }
  for (int i = 1; i <= 2; ++i) {
    ASSERT_TRUE(nodes[i]->WaitForOutput("step=5", kTimeout)) << "worker process " << i << " did not train\n"
                                                             << nodes[i]->output() << sched.output();
  }
  sched.KillAndRestart(absl::Seconds(1));
  ASSERT_GT(sched.port(), 0) << sched.output();
  const char* names[] = {"server", "worker process 1", "worker process 2"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(nodes[i]->Wait(absl::Seconds(30)), 0) << names[i] << " did not finish with 0\n"
                                                    << nodes[i]->output() << sched.output();
    EXPECT_TRUE(absl::StrContains(nodes[i]->output(), "registered again with the scheduler at " + sched.address()))
        << names[i] << "\n"
        << nodes[i]->output();
  }
  EXPECT_EQ(sched.process().Wait(kTimeout), 0) << sched.output();
}

}  // namespace
}  // namespace dtrain::testing
