// How processes start and end: a port is one service's, a job that cannot start or
// fails ends every process non-zero with a reason, requested ranks are honoured,
// addresses work over IPv6, and every binary answers --version and --help with 0.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <tuple>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_util.h"
#include "common/scheduler_client.h"
#include "tests/integration/scheduler/scheduler_process.h"

namespace dtrain::testing {
namespace {

std::map<std::string, std::string> NodeEnv(const std::string& scheduler, int workers, int servers) {
  return {{"DTRAIN_SCHEDULER_ADDR", scheduler},
          {"DTRAIN_NUM_WORKERS", std::to_string(workers)},
          {"DTRAIN_NUM_SERVERS", std::to_string(servers)}};
}

// gRPC's SO_REUSEPORT default let a second scheduler start on a taken port, and the
// kernel split the nodes between the two.
TEST(LifecycleTest, SecondSchedulerOnThePortExitsNamingTheHolder) {
  SchedulerProcess first(1, 1);
  ASSERT_FALSE(first.address.empty()) << first.process->output();
  const std::string port = first.address.substr(first.address.rfind(':') + 1);
  auto [code, output] = RunToEnd(
      {Bin("dtrain-scheduler"), "--host", "127.0.0.1", "--port", port, "--num-workers", "1", "--num-servers", "1"},
      absl::Seconds(15));
  EXPECT_NE(code, -1) << "the second scheduler is running on a taken port: " << output;
  EXPECT_NE(code, 0) << output;
  EXPECT_NE(output.find("already in use by pid " + std::to_string(first.process->pid()) + " (dtrain-scheduler)"),
            std::string::npos)
      << output;
  EXPECT_TRUE(first.process->running());
}

// Nodes that never come: the scheduler gives up at --register-timeout, non-zero,
// naming who is missing (it used to log "still waiting" forever).
TEST(LifecycleTest, SchedulerExitsWhenRegistrationMissesItsDeadline) {
  SchedulerProcess sched(2, 1, {"--register-timeout", "2"});
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient w(sched.address);
  auto reg = std::async(std::launch::async,
                        [&] { return w.Register(v1::ROLE_WORKER, "127.0.0.1:1", 1, 2, 1, absl::Seconds(20)); });
  const int code = sched.process->Wait(absl::Seconds(15));
  const std::string& out = sched.process->output();
  EXPECT_NE(code, -1) << "the scheduler still waits: " << out;
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("missing worker rank 0; server rank 0"), std::string::npos) << out;
  EXPECT_NE(out.find("--register-timeout 2"), std::string::npos) << out;
  EXPECT_FALSE(reg.get().ok());
}

// A server of a failed job must not exit 0 (Kubernetes would call the job a success).
TEST(LifecycleTest, ServerExitsNonZeroWhenTheJobFails) {
  SchedulerProcess sched(1, 1);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  Subprocess server({Bin("dtrain-server")}, NodeEnv(sched.address, 1, 1));
  SchedulerClient worker(sched.address);
  auto reg = worker.Register(v1::ROLE_WORKER, "127.0.0.1", -1, 1, 1, absl::Seconds(20));
  ASSERT_TRUE(reg.ok()) << reg.status() << server.output();
  worker.StartHeartbeat(absl::Milliseconds(100), {});
  ASSERT_TRUE(worker.Leave(/*failed=*/true, "out of memory").ok());
  const int code = server.Wait(absl::Seconds(20));
  EXPECT_EQ(code, 1) << server.output();
  EXPECT_NE(server.output().find("worker 0 failed: out of memory"), std::string::npos) << server.output();
  EXPECT_EQ(sched.process->Wait(absl::Seconds(20)), 1) << sched.process->output();
}

TEST(LifecycleTest, ServerExitsNonZeroWhenTheSchedulerIsLost) {
  SchedulerProcess sched(1, 1);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  Subprocess server({Bin("dtrain-server")}, NodeEnv(sched.address, 1, 1));
  SchedulerClient worker(sched.address);
  ASSERT_TRUE(worker.Register(v1::ROLE_WORKER, "127.0.0.1", -1, 1, 1, absl::Seconds(20)).ok()) << server.output();
  ASSERT_TRUE(server.WaitForOutput("listening on", absl::Seconds(10))) << server.output();
  sched.process->Signal(SIGKILL);
  const int code = server.Wait(absl::Seconds(30));
  EXPECT_EQ(code, 1) << server.output();
  EXPECT_NE(server.output().find("lost the scheduler"), std::string::npos) << server.output();
}

// ps-lite's DMLC_SERVER_ID: the server that asked for rank 1 gets it, even when it
// registers first.
TEST(LifecycleTest, DmlcServerIdIsTheRankGiven) {
  SchedulerProcess sched(1, 2);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  auto env1 = NodeEnv(sched.address, 1, 2);
  env1["DMLC_SERVER_ID"] = "1";
  Subprocess server1({Bin("dtrain-server")}, env1);
  SchedulerClient probe(sched.address);
  ASSERT_TRUE(Eventually(
      [&] {
        auto status = probe.GetStatus(absl::Seconds(1));
        return status.ok() && status->nodes_size() == 1;
      },
      absl::Seconds(10)))
      << server1.output();
  auto env0 = NodeEnv(sched.address, 1, 2);
  env0["DMLC_SERVER_ID"] = "0";
  Subprocess server0({Bin("dtrain-server")}, env0);
  SchedulerClient worker(sched.address);
  ASSERT_TRUE(worker.Register(v1::ROLE_WORKER, "127.0.0.1", -1, 1, 2, absl::Seconds(20)).ok())
      << server0.output() << server1.output();
  std::optional<v1::NodeInfo> rank1 = FindNode(probe, v1::ROLE_SERVER, 1);
  ASSERT_TRUE(rank1.has_value());
  EXPECT_EQ(rank1->pid(), server1.pid()) << sched.process->output();

  // A second node asking for a rank that is taken is told so.
  auto dup = NodeEnv(sched.address, 1, 2);
  dup["DMLC_SERVER_ID"] = "1";
  dup["DTRAIN_REGISTER_TIMEOUT"] = "5";
  auto [code, out] = RunToEnd({Bin("dtrain-server")}, absl::Seconds(20), dup);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("server rank 1 is already held by pid " + std::to_string(server1.pid())), std::string::npos)
      << out;
}

// An IPv6 scheduler: nodes reach it at [::1]:P and advertise [::1]:Q.
TEST(LifecycleTest, ClusterOverIpv6Loopback) {
  if (::access("/proc/net/if_inet6", R_OK) != 0) GTEST_SKIP() << "no IPv6 on this machine";
  const std::string port_file = MakeTempDir() + "/port";
  Subprocess sched({Bin("dtrain-scheduler"), "--host", "::1", "--port", "0", "--port-file", port_file, "--num-workers",
                    "1", "--num-servers", "1"});
  int port = 0;
  ASSERT_TRUE(Eventually(
      [&] {
        std::ifstream in(port_file);
        return (in >> port) && port > 0;
      },
      absl::Seconds(10)))
      << sched.output();
  const std::string address = absl::StrCat("[::1]:", port);
  EXPECT_TRUE(sched.WaitForOutput("listening on " + address, absl::Seconds(5))) << sched.output();
  Subprocess server({Bin("dtrain-server")}, NodeEnv(address, 1, 1));
  SchedulerClient worker(address);
  auto reg = worker.Register(v1::ROLE_WORKER, "::1", -1, 1, 1, absl::Seconds(20));
  ASSERT_TRUE(reg.ok()) << reg.status() << server.output() << sched.output();
  ASSERT_EQ(reg->cluster().servers_size(), 1);
  const std::string advertised = reg->cluster().servers(0).address();
  EXPECT_TRUE(absl::StartsWith(advertised, "[::1]:")) << advertised;
  // The advertised address really serves.

  auto channel = MakeChannel(advertised);
  EXPECT_TRUE(channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(5)))) << advertised;
}

// A barrier name is capped (the scheduler keeps barriers while they are open).
TEST(LifecycleTest, OverlongBarrierNameIsRefusedNamingTheLimit) {
  SchedulerProcess sched(1, 0);
  ASSERT_FALSE(sched.address.empty()) << sched.process->output();
  SchedulerClient w(sched.address);
  ASSERT_TRUE(w.Register(v1::ROLE_WORKER, "127.0.0.1", -1, 1, 0, absl::Seconds(10)).ok());
  absl::Status s = w.Barrier(std::string(100000, 'x'), v1::BARRIER_GROUP_WORKERS, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("limit of 256 bytes"), std::string::npos) << s;
  EXPECT_TRUE(w.Barrier("epoch-1", v1::BARRIER_GROUP_WORKERS, absl::Seconds(5)).ok());
}

// An elastic job's scheduler checks its flags and reads the recorded schedule before
// anything starts: a file that does not parse ends it with 2, naming the file and line.
TEST(LifecycleTest, ElasticSchedulerRefusesABadReplayFileBeforeItStarts) {
  const std::string bad = MakeTempDir() + "/recorded-membership.json";
  std::ofstream(bad) << "{\"format\": \"dtrain-membership-1\",\n \"min_workers\": 2,,\n}\n";
  const std::vector<std::string> job = {Bin("dtrain-scheduler"),
                                        "--num-workers",
                                        "2",
                                        "--num-servers",
                                        "1",
                                        "--kv-store",
                                        "dist_sync",
                                        "--elastic",
                                        "2:4"};
  std::vector<std::string> argv = job;
  argv.insert(argv.end(), {"--replay-membership", bad});
  auto [code, out] = RunToEnd(argv, absl::Seconds(30));
  EXPECT_EQ(code, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, bad)) << out;
  EXPECT_TRUE(absl::StrContains(out, "line 2")) << out;
  EXPECT_FALSE(absl::StrContains(out, "listening")) << out;
  argv = job;
  argv[2] = "5";  // -n above MAX
  std::tie(code, out) = RunToEnd(argv, absl::Seconds(30));
  EXPECT_EQ(code, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "--elastic")) << out;
}

// `--version` everywhere, and help exits 0 everywhere (`dtrain run --help` exited 2).
TEST(LifecycleTest, EveryBinaryAnswersVersionAndHelpWithZero) {
  const std::vector<std::vector<std::string>> commands = {
      {"dtrain"},         {"dtrain", "launch"},  {"dtrain", "run"},    {"dtrain", "status"},
      {"dtrain", "plot"}, {"dtrain", "predict"}, {"dtrain-scheduler"}, {"dtrain-server"},
      {"dtrain-worker"},  {"dtrain-infer"}};
  std::map<std::string, std::string> no_role = {{"DTRAIN_ROLE", ""}, {"DMLC_ROLE", ""}};
  for (const auto& c : commands) {
    for (const char* flag : {"--version", "--help"}) {
      std::vector<std::string> argv = {Bin(c[0])};
      argv.insert(argv.end(), c.begin() + 1, c.end());
      argv.push_back(flag);
      auto [code, out] = RunToEnd(argv, absl::Seconds(30), no_role);
      const std::string what = absl::StrCat(absl::StrJoin(c, " "), " ", flag);
      EXPECT_EQ(code, 0) << what << ": " << out;
      if (std::string(flag) == "--version") {
        EXPECT_NE(out.find(" 0.1.0 (git "), std::string::npos) << what << ": " << out;
      } else {
        EXPECT_NE(out.find("usage"), std::string::npos) << what << ": " << out;
      }
    }
  }
}

}  // namespace
}  // namespace dtrain::testing
