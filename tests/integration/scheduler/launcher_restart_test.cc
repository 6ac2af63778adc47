// `dtrain launch --max-restarts N`: a failed worker or scheduler is started again
// with its rank and port while the others keep running; past N, or for a failure
// the policy does not cover, the job stops as before, naming the process. The real
// scheduler already gives a requested rank held by a DEAD node to its new
// registration, which is all a fake worker needs to rejoin.
#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/scheduler/launcher_harness.h"

namespace dtrain::testing {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text between the first `before` and the next `after` ("" if absent).
std::string Between(const std::string& text, const std::string& before, const std::string& after) {
  const size_t at = text.find(before);
  if (at == std::string::npos) return "";
  const size_t from = at + before.size();
  const size_t to = text.find(after, from);
  return to == std::string::npos ? "" : text.substr(from, to - from);
}

TEST(LauncherRestartTest, KilledWorkerIsRestartedWithItsRankAndTheJobSucceeds) {
  auto env = kFastEnv;
  env["FAKE_NODE_KILL"] = "worker:1:2";  // first incarnation only
  // Worker 0 trains 2 s, so it reaches the final barrier after worker 1 is back (1 s backoff).
  const auto [code, out] = RunToEnd(
      Launch(FakeBinDir(), {"-n", "2", "-s", "1", "--max-restarts", "3", "--", "--steps", "40", "--step-ms", "50"}),
      kRunTimeout, env);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("dtrain launch: restarting a failed worker or scheduler up to 3 times each (--restart-on "
                     "failure)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("dtrain launch: restarting worker 1 (1 of 3): killed by signal 9 (Killed); starting it again "
                     "in 1s\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("dtrain launch: worker 1 restarted as pid "), std::string::npos) << out;
  EXPECT_NE(out.find("(DTRAIN_RESTART_COUNT=1)"), std::string::npos) << out;
  // The same rank, told it is a restart; the old incarnation's output came first.
  const size_t first = out.find("[worker 1] fake worker registered rank=1 servers=1 restart_count=0");
  const size_t second = out.find("[worker 1] fake worker registered rank=1 servers=1 restart_count=1");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_LT(first, second);
  EXPECT_LT(out.find("[worker 1] partial-line step=2"), out.find("restarting worker 1"));
  EXPECT_EQ(Count(out, "restarting worker"), 1u) << out;
  EXPECT_NE(out.find("[worker 1] fake worker 1 done"), std::string::npos) << out;
  EXPECT_NE(out.find("[worker 0] fake worker 0 done"), std::string::npos) << out;
  EXPECT_NE(out.find("dtrain launch: all 2 workers finished"), std::string::npos) << out;
  ExpectPrefixed(out);
  ExpectNothingLeft(out, 5);  // scheduler, server, worker 0, worker 1 twice
}

TEST(LauncherRestartTest, PastMaxRestartsTheJobStopsNamingTheProcess) {
  auto env = kFastEnv;
  env["FAKE_NODE_KILL"] = "worker:1:1:100";  // every incarnation
  const absl::Time start = absl::Now();
  const auto [code, out] = RunToEnd(Launch(FakeBinDir(), {"-n", "2", "-s", "1", "--max-restarts", "2",
                                                          "--restart-backoff", "0.1", "--", "--steps", "200"}),
                                    kRunTimeout, env);
  EXPECT_EQ(code, 1) << out;
  // The backoff doubles.
  EXPECT_NE(out.find("restarting worker 1 (1 of 2): killed by signal 9 (Killed); starting it again in 100ms"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("restarting worker 1 (2 of 2): killed by signal 9 (Killed); starting it again in 200ms"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("dtrain launch: worker 1 was killed by signal 9 (Killed) after 2 restarts (--max-restarts 2); "
                     "stopped the others"),
            std::string::npos)
      << out;
  EXPECT_EQ(Count(out, "restarting worker"), 2u) << out;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // worker 0 (10 s of steps) was stopped
  ExpectPrefixed(out);
  ExpectNothingLeft(out, 6);  // scheduler, server, worker 0, worker 1 three times
}

TEST(LauncherRestartTest, RestartOnSignalLeavesAnExitStatusAlone) {
  auto env = kFastEnv;
  env["FAKE_NODE_EXIT"] = "worker:1:1";
  const auto [code, out] = RunToEnd(Launch(FakeBinDir(), {"-n", "2", "-s", "1", "--max-restarts", "3", "--restart-on",
                                                          "signal", "--", "--steps", "2"}),
                                    kRunTimeout, env);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("dtrain launch: worker 1 exited with status 1, not restarted (--restart-on signal: only a "
                     "death by a signal is); stopped the others"),
            std::string::npos)
      << out;
  EXPECT_EQ(Count(out, "restarting worker"), 0u) << out;
  ExpectNothingLeft(out, 4);
}

TEST(LauncherRestartTest, AServerIsNotRestarted) {
  Subprocess launcher(Launch(FakeBinDir(), {"-n", "1", "-s", "1", "--max-restarts", "3", "--", "--steps", "100000"}),
                      kFastEnv);
  ASSERT_TRUE(launcher.WaitForOutput("[worker 0] partial-line step=2", absl::Seconds(20))) << launcher.output();
  std::vector<std::string> pids = ValuesAfter(launcher.output(), "pid", "[server 0] fake server starting");
  ASSERT_EQ(pids.size(), 1u) << launcher.output();
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(pids[0], &pid)) << pids[0];
  ::kill(pid, SIGKILL);
  EXPECT_EQ(launcher.Wait(absl::Seconds(20)), 1) << launcher.output();
  EXPECT_NE(launcher.output().find("dtrain launch: server 0 was killed by signal 9 (Killed), not restarted (a server "
                                   "is not restarted yet: its shards would be lost); stopped the others"),
            std::string::npos)
      << launcher.output();
  ExpectNothingLeft(launcher.output(), 3);
}

// The scheduler comes back on the port the nodes know it by. (The nodes cannot
// rejoin a new scheduler yet: that is the scheduler side of recovery.)
TEST(LauncherRestartTest, KilledSchedulerIsRestartedOnItsPort) {
  Subprocess launcher(Launch(FakeBinDir(), {"-n", "1", "-s", "1", "--max-restarts", "1", "--restart-backoff", "0.2",
                                            "--", "--steps", "100000"}),
                      kFastEnv);
  ASSERT_TRUE(launcher.WaitForOutput("[worker 0] partial-line step=2", absl::Seconds(20))) << launcher.output();
  const std::vector<int> first = Pids(launcher.output());
  const std::string addr = Between(launcher.output(), "dtrain launch: scheduler at ", ";");
  ASSERT_FALSE(addr.empty()) << launcher.output();
  const std::string listening = absl::StrCat("listening on ", addr, " (pid ");
  int scheduler_pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(Between(launcher.output(), listening, ")"), &scheduler_pid)) << launcher.output();
  ::kill(scheduler_pid, SIGKILL);
  ASSERT_TRUE(launcher.WaitForOutput(
      "dtrain launch: restarting scheduler (1 of 1): killed by signal 9 (Killed); starting it again in 200ms",
      absl::Seconds(10)))
      << launcher.output();
  // Listening again, on the same address.
  ASSERT_TRUE(launcher.WaitForOutput("(DTRAIN_RESTART_COUNT=1)", absl::Seconds(10))) << launcher.output();
  ASSERT_TRUE(Eventually([&] { return Count(launcher.output(), listening) == 2; }, absl::Seconds(10)))
      << "the restarted scheduler did not listen on " << addr << "\n"
      << launcher.output();
  launcher.Signal(SIGTERM);
  const int code = launcher.Wait(absl::Seconds(30));
  // 143 unless a node gave up on the lost scheduler and used up its restart first.
  EXPECT_TRUE(code == 143 || code == 1) << code << "\n" << launcher.output();
  const std::string out = launcher.output();
  for (int pid : Pids(out)) EXPECT_FALSE(Running(pid)) << "pid " << pid << " outlived the launcher";
  EXPECT_GT(Pids(out).size(), first.size());
}

TEST(LauncherRestartTest, BadRestartFlagsAreUsageErrors) {
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--max-restarts", "-1"}, {"--restart-on", "always"}, {"--restart-backoff", "-1"}}) {
    std::vector<std::string> tail = {"-n", "1"};
    tail.insert(tail.end(), flags.begin(), flags.end());
    const auto [code, out] = RunToEnd(Launch(FakeBinDir(), tail), kRunTimeout);
    EXPECT_EQ(code, 2) << flags[0] << " " << flags[1] << "\n" << out;
    EXPECT_NE(out.find(flags[0]), std::string::npos) << out;  // the message names the flag
  }
}

}  // namespace
}  // namespace dtrain::testing
