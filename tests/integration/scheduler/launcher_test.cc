// `dtrain launch` with the real scheduler and a fake server/worker (fake_node.cc)
// linked into a private --bin-dir.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "tests/integration/scheduler/launcher_harness.h"

namespace dtrain::testing {
namespace {

TEST(LauncherTest, AllWorkersSucceedPrefixesLinesAndLeavesNothing) {
  const auto [code, out] =
      RunToEnd(Launch(FakeBinDir(), {"-n", "2", "-s", "2", "--", "--steps", "3"}), kRunTimeout, kFastEnv);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("dtrain launch: scheduler at 127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find("[scheduler] "), std::string::npos);
  EXPECT_NE(out.find("[server 1] fake server starting pid="), std::string::npos) << out;
  EXPECT_NE(out.find("[worker 0] fake worker starting pid="), std::string::npos) << out;
  EXPECT_NE(out.find("args=--kv-store dist_sync --steps 3"), std::string::npos) << out;
  // Partial writes come out as whole lines.
  EXPECT_NE(out.find("[worker 1] partial-line step=3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker 1] fake worker 1 done"), std::string::npos) << out;
  EXPECT_NE(out.find("[server 0] fake server 0 shutting down (told=1)"), std::string::npos) << out;
  EXPECT_NE(out.find("dtrain launch: all 2 workers finished"), std::string::npos) << out;
  ExpectPrefixed(out);
  ExpectNothingLeft(out, 5);
}

TEST(LauncherTest, FailingWorkerStopsTheOthersAndIsNamed) {
  auto env = kFastEnv;
  env["FAKE_NODE_EXIT"] = "worker:1:3";
  const absl::Time start = absl::Now();
  const auto [code, out] =
      RunToEnd(Launch(FakeBinDir(), {"-n", "2", "-s", "1", "--", "--steps", "2"}), kRunTimeout, env);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("dtrain launch: worker 1 exited with status 3; stopped the others"), std::string::npos) << out;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  ExpectPrefixed(out);
  ExpectNothingLeft(out, 4);
}

TEST(LauncherTest, SigtermStopsEveryChild) {
  Subprocess launcher(Launch(FakeBinDir(), {"-n", "1", "-s", "1", "--", "--steps", "100000"}), kFastEnv);
  ASSERT_TRUE(launcher.WaitForOutput("[worker 0] partial-line step=2", absl::Seconds(20))) << launcher.output();
  launcher.Signal(SIGTERM);
  EXPECT_EQ(launcher.Wait(absl::Seconds(20)), 143) << launcher.output();
  EXPECT_NE(launcher.output().find("dtrain launch: received SIGTERM; stopping the job"), std::string::npos)
      << launcher.output();
  ExpectNothingLeft(launcher.output(), 3);
}

TEST(LauncherTest, ChildIgnoringSigtermIsKilledAfterTheGrace) {
  auto env = kFastEnv;
  env["FAKE_NODE_EXIT"] = "worker:1:3";
  env["FAKE_NODE_IGNORE_TERM"] = "1";
  // The scheduler tells the server the job failed (every worker gone, one dead); a
  // server that will not stop ignores that too.
  env["FAKE_NODE_IGNORE_SHUTDOWN"] = "1";
  const auto [code, out] = RunToEnd(
      Launch(FakeBinDir(), {"-n", "2", "-s", "1", "--stop-grace", "0.5", "--", "--steps", "2"}), kRunTimeout, env);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("dtrain launch: server 0 did not exit within 500ms of SIGTERM; killing it"), std::string::npos)
      << out;
  EXPECT_NE(out.find("dtrain launch: worker 1 exited with status 3; stopped the others"), std::string::npos) << out;
  ExpectNothingLeft(out, 4);
}

TEST(LauncherTest, StragglersAfterTheWorkersAreStopped) {
  auto env = kFastEnv;
  env["FAKE_NODE_IGNORE_SHUTDOWN"] = "1";
  const auto [code, out] = RunToEnd(
      Launch(FakeBinDir(), {"-n", "1", "-s", "1", "--finish-grace", "0.5", "--", "--steps", "1"}), kRunTimeout, env);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("dtrain launch: server 0 still runs 500ms after the workers finished; stopping it"),
            std::string::npos)
      << out;
  ExpectNothingLeft(out, 3);
}

TEST(LauncherTest, KilledLauncherTakesItsChildrenAlong) {
  std::string out;
  {
    // Killed, the launcher cannot remove its scratch directory: give it one of ours.
    auto env = kFastEnv;
    env["TMPDIR"] = MakeTempDir();
    Subprocess launcher(Launch(FakeBinDir(), {"-n", "1", "-s", "1", "--", "--steps", "100000"}), env);
    ASSERT_TRUE(launcher.WaitForOutput("[worker 0] partial-line step=2", absl::Seconds(20))) << launcher.output();
    ::kill(launcher.pid(), SIGKILL);  // no chance to clean up: PR_SET_PDEATHSIG must
    launcher.Wait(absl::Seconds(5));
    out = launcher.output();
  }
  const std::vector<int> pids = Pids(out);
  ASSERT_EQ(pids.size(), 3u) << out;
  for (int pid : pids) {
    EXPECT_TRUE(Eventually([pid] { return !Running(pid); }, absl::Seconds(10))) << "pid " << pid << " survived";
  }
}

TEST(LauncherTest, LocalKvStoreRunsOneWorkerAlone) {
  const auto [code, out] = RunToEnd(Launch(FakeBinDir(), {"-n", "1", "--kv-store", "local"}), kRunTimeout);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("[worker 0] fake worker local mode kv-store=local"), std::string::npos) << out;
  EXPECT_EQ(out.find("[scheduler]"), std::string::npos) << out;

  const auto [bad, msg] = RunToEnd(Launch(FakeBinDir(), {"-n", "2", "--kv-store", "local"}), kRunTimeout);
  EXPECT_EQ(bad, 2);
  EXPECT_NE(msg.find("use -n 1"), std::string::npos) << msg;
}

TEST(LauncherTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunToEnd({Bin("dtrain"), "frobnicate"}, kRunTimeout).first, 2);
  EXPECT_EQ(RunToEnd({Bin("dtrain")}, kRunTimeout).first, 2);
  EXPECT_EQ(RunToEnd({Bin("dtrain"), "launch"}, kRunTimeout).first, 2);  // -n missing
  EXPECT_EQ(RunToEnd({Bin("dtrain"), "run"}, kRunTimeout, {{"DTRAIN_ROLE", ""}, {"DMLC_ROLE", ""}}).first, 2);
  EXPECT_EQ(RunToEnd({Bin("dtrain"), "run"}, kRunTimeout, {{"DMLC_ROLE", "gardener"}}).first, 2);
  const auto [code, out] = RunToEnd({Bin("dtrain"), "launch", "-n", "1", "--bin-dir", "/nonexistent"}, kRunTimeout);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("cannot find dtrain-scheduler in /nonexistent"), std::string::npos) << out;
}

TEST(LauncherTest, ElasticFlagsAreRefusedBeforeAnythingStarts) {
  // --bin-dir names nothing: a refusal that came after the search for the binaries (or
  // after a start) would say so, exit 1.
  const std::string dir = MakeTempDir();
  const std::string bad_file = dir + "/membership.json";
  std::ofstream(bad_file) << "{\"format\": \"dtrain-membership-1\",\n oops}\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-n", "2", "--elastic", "3:2"}, "--elastic 3:2: MIN 3 is above MAX 2"},
      {{"-n", "5", "--elastic", "2:4"}, "--num-workers 5 is above --elastic 2:4's MAX 4"},
      {{"-n", "2", "--elastic-lr", "keep"}, "--elastic-lr needs --elastic MIN:MAX"},
      {{"-n", "2", "--elastic", "2:4", "--kv-store", "dist_async"}, "--elastic 2:4 needs --kv-store dist_sync"},
      {{"-n", "2", "--elastic", "2:4", "--replay-membership", bad_file},
       "--replay-membership: " + bad_file + ": line 2"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> argv = {Bin("dtrain"), "launch", "--bin-dir", "/nonexistent"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "--network", "lenet"});
    const auto [code, out] = RunToEnd(argv, kRunTimeout, {{"DTRAIN_ELASTIC", "2:8"}});
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("dtrain launch: "), std::string::npos) << out;
    EXPECT_NE(out.find(message), std::string::npos) << out;
  }
  // The TensorFlow 1 style spec: its worker list stands for -n.
  const auto [code, out] =
      RunToEnd({Bin("dtrain"), "run", "--bin-dir", "/nonexistent", "--ps_hosts=127.0.0.1:1",
                "--worker_hosts=127.0.0.1:2,127.0.0.1:3", "--job_name=worker", "--task_index=1", "--elastic", "3:4"},
               kRunTimeout);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("dtrain run: --num-workers 2 is below --elastic 3:4's MIN 3 (the 2 workers the spec lists)"),
            std::string::npos)
      << out;
}

TEST(LauncherTest, AnElasticJobSaysHowToAddAWorker) {
  // Only the launcher's own lines are asserted: how the job goes on is the scheduler's
  // business (the fake nodes know nothing of --elastic).
  const auto [code, out] = RunToEnd(
      Launch(FakeBinDir(), {"-n", "1", "-s", "1", "--elastic", "1:2", "--", "--steps", "1"}), kRunTimeout, kFastEnv);
  EXPECT_NE(out.find("dtrain launch: scheduler at 127.0.0.1:"), std::string::npos) << out;
  EXPECT_NE(out.find(", elastic 1:2: workers may join and leave)"), std::string::npos) << out;
  const size_t join = out.find("dtrain launch: to add a worker while it runs: DTRAIN_SCHEDULER_ADDR=127.0.0.1:");
  ASSERT_NE(join, std::string::npos) << out;
  const std::string line = out.substr(join, out.find('\n', join) - join);
  EXPECT_NE(line.find(" DTRAIN_ELASTIC=1:2 "), std::string::npos) << line;
  EXPECT_NE(line.find("/dtrain-worker --kv-store dist_sync --steps 1"), std::string::npos) << line;
  EXPECT_EQ(line.find("DTRAIN_RANK"), std::string::npos) << line;
}

TEST(LauncherTest, RunExecsTheRoleBinary) {
  // DMLC_ROLE=scheduler with ps-lite's variables starts the real scheduler.
  const std::string port_file = MakeTempDir() + "/port";
  Subprocess sched({Bin("dtrain"), "run", "--host", "127.0.0.1", "--port-file", port_file},
                   {{"DMLC_ROLE", "scheduler"}, {"DMLC_PS_ROOT_PORT", "0"}, {"DMLC_NUM_WORKER", "3"}});
  ASSERT_TRUE(sched.WaitForOutput("expecting 3 workers", absl::Seconds(10))) << sched.output();
  sched.Signal(SIGTERM);
  EXPECT_EQ(sched.Wait(absl::Seconds(10)), 0) << sched.output();
}

}  // namespace
}  // namespace dtrain::testing
