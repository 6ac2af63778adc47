// The real dtrain-scheduler binary, driven by real SchedulerClients over gRPC.
#include <signal.h>

#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

std::future<absl::StatusOr<v1::RegisterResponse>> RegisterAsync(SchedulerClient& c, v1::Role role, int rank,
                                                                int workers, int servers,
                                                                absl::Duration timeout = kTimeout,
                                                                std::string address = "127.0.0.1:1") {
  return std::async(std::launch::async, [&c, role, rank, workers, servers, timeout, address] {
    return c.Register(role, address, rank, workers, servers, timeout);
  });
}

TEST(SchedulerProcessTest, AssignsRanksAndSharesTheClusterView) {
  SchedulerProcess sched(2, 2, {"--kv-store", "dist_async"});
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient s0(sched.address), s1(sched.address), w0(sched.address), w1(sched.address);
  auto fs1 = RegisterAsync(s1, v1::ROLE_SERVER, 1, 2, 2, kTimeout, "10.0.0.2:7001");
  auto fs0 = RegisterAsync(s0, v1::ROLE_SERVER, 0, 2, 2, kTimeout, "10.0.0.1:7000");
  auto fw0 = RegisterAsync(w0, v1::ROLE_WORKER, -1, 2, 2);
  auto fw1 = RegisterAsync(w1, v1::ROLE_WORKER, -1, 2, 2);
  auto rs0 = fs0.get(), rs1 = fs1.get(), rw0 = fw0.get(), rw1 = fw1.get();
  ASSERT_TRUE(rs0.ok() && rs1.ok() && rw0.ok() && rw1.ok())
      << rs0.status() << rs1.status() << rw0.status() << rw1.status();
  EXPECT_EQ(rs0->rank(), 0);
  EXPECT_EQ(rs1->rank(), 1);
  EXPECT_EQ((std::set<int>{rw0->rank(), rw1->rank()}), (std::set<int>{0, 1}));
  const v1::ClusterView& view = rw0->cluster();
  EXPECT_EQ(view.kv_store(), "dist_async");
  EXPECT_EQ(view.num_workers(), 2);
  ASSERT_EQ(view.servers_size(), 2);
  EXPECT_EQ(view.servers(0).address(), "10.0.0.1:7000");
  EXPECT_EQ(view.servers(1).address(), "10.0.0.2:7001");

  SchedulerClient late(sched.address);
  // The job runs: the holder may be a dead process not yet found so, and the newcomer
  // retries until its deadline, then says who holds the rank and when it would be freed.
  auto dup = late.Register(v1::ROLE_SERVER, "x:1", 0, 2, 2, absl::Seconds(2));
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kUnavailable) << dup.status();
  EXPECT_THAT(std::string(dup.status().message()),
              ::testing::AllOf(::testing::HasSubstr("server rank 0 is already held by pid"),
                               ::testing::HasSubstr("declares it dead after")));
  auto status = late.GetStatus(absl::Seconds(2));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->nodes_size(), 4);
}

TEST(SchedulerProcessTest, BarrierAcrossTwoClientsAndItsDeadline) {
  SchedulerProcess sched(2, 0);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient a(sched.address), b(sched.address);
  auto fa = RegisterAsync(a, v1::ROLE_WORKER, 0, 2, 0);
  auto fb = RegisterAsync(b, v1::ROLE_WORKER, 1, 2, 0);
  ASSERT_TRUE(fa.get().ok() && fb.get().ok());
  for (int round = 0; round < 2; ++round) {
    auto ba = std::async(std::launch::async, [&] { return a.Barrier("init", v1::BARRIER_GROUP_WORKERS, kTimeout); });
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(b.Barrier("init", v1::BARRIER_GROUP_WORKERS, kTimeout).ok());
    EXPECT_TRUE(ba.get().ok());
  }
  const absl::Time start = absl::Now();
  absl::Status lonely = a.Barrier("epoch", v1::BARRIER_GROUP_WORKERS, absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(lonely.code(), absl::StatusCode::kDeadlineExceeded) << lonely;
  EXPECT_NE(lonely.message().find("missing worker rank 1 ("), absl::string_view::npos) << lonely;
}

TEST(SchedulerProcessTest, RegistrationDeadlineNamesTheMissingWorker) {
  SchedulerProcess sched(2, 1);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient server(sched.address), worker(sched.address);
  auto fs = RegisterAsync(server, v1::ROLE_SERVER, -1, 2, 1, absl::Seconds(1));
  auto fw = RegisterAsync(worker, v1::ROLE_WORKER, 0, 2, 1, absl::Seconds(1));
  auto rw = fw.get();
  EXPECT_FALSE(fs.get().ok());  // the server is not admitted either
  EXPECT_EQ(rw.status().code(), absl::StatusCode::kDeadlineExceeded) << rw.status();
  EXPECT_NE(rw.status().message().find("1 of 2 workers"), absl::string_view::npos) << rw.status();
  EXPECT_NE(rw.status().message().find("missing worker rank 1"), absl::string_view::npos) << rw.status();
  EXPECT_TRUE(sched.process->WaitForOutput("worker 0 was not admitted: registration: 1 of 2 workers", absl::Seconds(2)))
      << sched.process->output();
}

TEST(SchedulerProcessTest, UnreachableSchedulerIsUnavailable) {
  SchedulerClient c("127.0.0.1:1");
  auto r = c.Register(v1::ROLE_WORKER, "", -1, 1, 0, absl::Milliseconds(300));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), absl::string_view::npos);
}

TEST(SchedulerProcessTest, KilledClientIsDeadAndOthersAreTold) {
  SchedulerProcess sched(2, 0);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  Subprocess fake({FAKE_NODE_PATH, "--role", "worker", "--steps", "100000"}, {{"DTRAIN_SCHEDULER_ADDR", sched.address},
                                                                              {"DTRAIN_NUM_WORKERS", "2"},
                                                                              {"DTRAIN_NUM_SERVERS", "0"},
                                                                              {"DTRAIN_RANK", "1"},
                                                                              {"DTRAIN_HEARTBEAT_INTERVAL", "0.1"}});
  SchedulerClient me(sched.address);
  auto reg = me.Register(v1::ROLE_WORKER, "", 0, 2, 0, kTimeout);
  ASSERT_TRUE(reg.ok()) << reg.status() << fake.output();
  std::mutex mu;
  std::vector<v1::NodeInfo> told;
  SchedulerClient::HeartbeatHooks hooks;
  hooks.on_dead = [&](const v1::NodeInfo& n) {
    std::lock_guard<std::mutex> lock(mu);
    told.push_back(n);
  };
  me.StartHeartbeat(absl::Milliseconds(100), hooks);
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = FindNode(me, v1::ROLE_WORKER, 1);
        return n && n->state() == v1::NODE_STATE_ALIVE && n->last_step() > 0;
      },
      kTimeout));
  fake.Signal(SIGKILL);
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = FindNode(me, v1::ROLE_WORKER, 1);
        return n && n->state() == v1::NODE_STATE_DEAD;
      },
      absl::Seconds(5)))
      << sched.process->output();
  EXPECT_TRUE(Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return !told.empty() && told[0].rank() == 1 && told[0].state() == v1::NODE_STATE_DEAD;
      },
      absl::Seconds(5)));
  EXPECT_TRUE(sched.process->WaitForOutput("worker 1 is DEAD", absl::Seconds(2))) << sched.process->output();
}

TEST(SchedulerProcessTest, ShutdownAfterAllWorkersLeaveThenExitZero) {
  SchedulerProcess sched(1, 1);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient server(sched.address), worker(sched.address);
  auto fs = RegisterAsync(server, v1::ROLE_SERVER, -1, 1, 1);
  auto fw = RegisterAsync(worker, v1::ROLE_WORKER, -1, 1, 1);
  ASSERT_TRUE(fs.get().ok() && fw.get().ok());
  std::promise<std::string> shutdown;
  std::atomic<bool> once{false};
  SchedulerClient::HeartbeatHooks hooks;
  hooks.on_shutdown = [&](const std::string& reason) {
    if (!once.exchange(true)) shutdown.set_value(reason);
  };
  server.StartHeartbeat(absl::Milliseconds(100), hooks);
  worker.StartHeartbeat(absl::Milliseconds(100), {});
  worker.SetProgress(10, 50.0);
  ASSERT_TRUE(worker.Leave(false, "done").ok());
  auto told = shutdown.get_future();
  ASSERT_EQ(told.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(told.get().find("all 1 workers finished"), std::string::npos);
  ASSERT_TRUE(server.Leave(false, "").ok());
  EXPECT_EQ(sched.process->Wait(absl::Seconds(10)), 0) << sched.process->output();
}

TEST(SchedulerProcessTest, FailedWorkerEndsTheJobAndExitsNonZero) {
  SchedulerProcess sched(1, 1);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient server(sched.address), worker(sched.address);
  auto fs = RegisterAsync(server, v1::ROLE_SERVER, -1, 1, 1);
  auto fw = RegisterAsync(worker, v1::ROLE_WORKER, -1, 1, 1);
  ASSERT_TRUE(fs.get().ok() && fw.get().ok());
  std::promise<std::string> shutdown;
  std::atomic<bool> once{false};
  SchedulerClient::HeartbeatHooks hooks;
  hooks.on_shutdown = [&](const std::string& reason) {
    if (!once.exchange(true)) shutdown.set_value(reason);
  };
  server.StartHeartbeat(absl::Milliseconds(100), hooks);
  ASSERT_TRUE(worker.Leave(true, "loss is NaN").ok());
  auto told = shutdown.get_future();
  ASSERT_EQ(told.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(told.get().find("worker 0 failed: loss is NaN"), std::string::npos);
  ASSERT_TRUE(server.Leave(false, "").ok());
  EXPECT_EQ(sched.process->Wait(absl::Seconds(10)), 1);
  EXPECT_NE(sched.process->output().find("job failed: worker 0 failed: loss is NaN"), std::string::npos)
      << sched.process->output();
}

TEST(SchedulerProcessTest, LostSchedulerEndsTheJobForItsNodes) {
  SchedulerProcess sched(1, 0);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient worker(sched.address);
  ASSERT_TRUE(worker.Register(v1::ROLE_WORKER, "", 0, 1, 0, kTimeout).ok());
  std::promise<std::string> shutdown;
  SchedulerClient::HeartbeatHooks hooks;
  hooks.reconnect_for = absl::Milliseconds(800);
  hooks.on_shutdown = [&](const std::string& reason) { shutdown.set_value(reason); };
  worker.StartHeartbeat(absl::Milliseconds(100), hooks);
  absl::SleepFor(absl::Milliseconds(200));
  sched.process->Signal(SIGKILL);
  auto told = shutdown.get_future();
  ASSERT_EQ(told.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(told.get().find("lost the scheduler at " + sched.address), std::string::npos);
}

TEST(SchedulerProcessTest, SigtermExitsCleanlyAndWakesWaiters) {
  SchedulerProcess sched(2, 0);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient waiting(sched.address);
  auto f = RegisterAsync(waiting, v1::ROLE_WORKER, -1, 2, 0, absl::Seconds(30));
  ASSERT_TRUE(sched.process->WaitForOutput("worker 0 joined", kTimeout));
  sched.process->Signal(SIGTERM);
  EXPECT_EQ(sched.process->Wait(absl::Seconds(5)), 0) << sched.process->output();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_FALSE(f.get().ok());
}

// Recovery (docs/recovery.md): a silent worker is declared dead, a new process takes
// its rank as incarnation 2, and the old process is fenced off on every call.
TEST(SchedulerProcessTest, ReplacementFencesTheStaleProcessAndAnotherJobIsRefused) {
  SchedulerProcess sched(2, 0, {"--job-id", "job-x", "--rejoin-timeout", "30", "--heartbeat-timeout", "1"});
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient a(sched.address), stale(sched.address), fresh(sched.address), other(sched.address);
  a.set_job_id("job-x");
  other.set_job_id("job-y");
  auto refused = other.Register(v1::ROLE_WORKER, "", 1, 2, 0, absl::Seconds(2));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("belongs to job 'job-y', but this scheduler runs job 'job-x'"),
            absl::string_view::npos)
      << refused.status();
  auto fa = RegisterAsync(a, v1::ROLE_WORKER, 0, 2, 0);
  auto fs = RegisterAsync(stale, v1::ROLE_WORKER, 1, 2, 0);  // no job id: takes the scheduler's
  auto ra = fa.get(), rs = fs.get();
  ASSERT_TRUE(ra.ok() && rs.ok()) << ra.status() << rs.status();
  EXPECT_EQ(rs->job_id(), "job-x");
  EXPECT_EQ(stale.incarnation(), 1u);
  EXPECT_FALSE(stale.rejoined());
  a.StartHeartbeat(absl::Milliseconds(100), {});
  // `stale` never heartbeats (a paused process): declared dead, but the rank may rejoin.
  ASSERT_TRUE(Eventually(
      [&] {
        auto n = FindNode(a, v1::ROLE_WORKER, 1);
        return n && n->state() == v1::NODE_STATE_DEAD && n->dead_since_unix_ms() > 0;
      },
      kTimeout))
      << sched.process->output();
  EXPECT_TRUE(sched.process->WaitForOutput("waiting up to the rejoin timeout for worker 1", absl::Seconds(2)))
      << sched.process->output();

  auto rf = fresh.Register(v1::ROLE_WORKER, "", 1, 2, 0, kTimeout);
  ASSERT_TRUE(rf.ok()) << rf.status();
  EXPECT_TRUE(fresh.rejoined());
  EXPECT_EQ(fresh.incarnation(), 2u);
  fresh.StartHeartbeat(absl::Milliseconds(100), {});  // within --heartbeat-timeout 1
  EXPECT_TRUE(sched.process->WaitForOutput("worker 1 rejoined (incarnation 2, restart 1); incarnation 1 is fenced",
                                           absl::Seconds(2)))
      << sched.process->output();
  auto n = FindNode(a, v1::ROLE_WORKER, 1);
  ASSERT_TRUE(n.has_value());
  EXPECT_NE(n->state(), v1::NODE_STATE_DEAD);
  EXPECT_EQ(n->incarnation(), 2u);
  EXPECT_EQ(n->restarts(), 1);

  // The old process: its barrier and its heartbeats are refused, saying why.
  absl::Status b = stale.Barrier("epoch", v1::BARRIER_GROUP_WORKERS, absl::Seconds(2));
  EXPECT_EQ(b.code(), absl::StatusCode::kFailedPrecondition) << b;
  EXPECT_NE(b.message().find("fenced: worker 1 incarnation 1 replaced by 2"), absl::string_view::npos) << b;
  std::promise<std::string> ended;
  std::atomic<bool> once{false};
  SchedulerClient::HeartbeatHooks hooks;
  hooks.on_shutdown = [&](const std::string& reason) {
    if (!once.exchange(true)) ended.set_value(reason);
  };
  stale.StartHeartbeat(absl::Milliseconds(100), hooks);
  auto reason = ended.get_future();
  ASSERT_EQ(reason.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(reason.get().find("incarnation 1 replaced by 2"), std::string::npos);
  EXPECT_TRUE(stale.job_failed());

  // The new one and worker 0 meet at a barrier and finish the job.
  auto ba = std::async(std::launch::async, [&] { return a.Barrier("done", v1::BARRIER_GROUP_WORKERS, kTimeout); });
  EXPECT_TRUE(fresh.Barrier("done", v1::BARRIER_GROUP_WORKERS, kTimeout).ok());
  EXPECT_TRUE(ba.get().ok());
  EXPECT_EQ(stale.Leave(false, "").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(a.Leave(false, "").ok());
  EXPECT_TRUE(fresh.Leave(false, "").ok());
  EXPECT_EQ(sched.process->Wait(absl::Seconds(10)), 0) << sched.process->output();
}

}  // namespace
}  // namespace dtrain::testing
