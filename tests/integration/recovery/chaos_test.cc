// Chaos test of Recovery I (docs/recovery.md): a 2-worker, 2-server dist_sync job
// under `dtrain launch --max-restarts` loses a worker, worker 0 or the scheduler at a
// seeded random moment (mid-step, during init, during a checkpoint save), or has a
// worker paused for 8 s (past its heartbeat timeout); every run must end with exit 0 and the uninterrupted run's
// final weights, bit for bit.
//
// The moments come from DTRAIN_CHAOS_SEED (default 1); tests/integration/recovery/
// run_chaos.sh runs the suite over many seeds. Each scenario prints its recovery time
// (kill to the replacement's first completed step) as "recovery time: 1.23 s".
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(6);
constexpr absl::Duration kLineTimeout = absl::Minutes(3);
// 3000 examples over 2 workers at batch 64: 23 steps per epoch.
constexpr int kBatches = 23;

// One generator per scenario, so that adding a scenario moves no other's moments.
std::mt19937_64 Rng(int scenario) { return std::mt19937_64(ChaosSeed() * 1000003 + scenario); }

int Uniform(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

std::vector<std::string> Argv(const std::string& prefix, bool restarts, const std::string& kv_store = "dist_sync") {
  std::vector<std::string> launch = {"--kv-store", kv_store};
  if (restarts) {
    for (const char* f : {"--max-restarts", "3", "--restart-backoff", "0.1"}) launch.push_back(f);
  }
  return ChaosRecipe(prefix, launch);
}

// The uninterrupted run's final weights, shared by the scenarios (SharedReference).
std::string Reference() { return ChaosReference(kRunTimeout); }

// Starts the job with restarts, waits for `who`'s line containing `text`, sleeps a
// seeded delay, sends `sig` to `victim` ("worker"/"scheduler", rank); returns the
// moment it was sent.
struct Chaos {
  explicit Chaos(int scenario, const std::map<std::string, std::string>& env = {})
      : rng(Rng(scenario)), job(Argv(MakeTempDir() + "/m", true), env) {}

  absl::Time Strike(const std::string& who, const std::string& text, int max_delay_ms, const std::string& role,
                    int rank, int sig) {
    at = WaitForLine(job, who, text, kLineTimeout);
    EXPECT_NE(at, std::string::npos) << "never saw " << who << " " << text << ":\n" << job.output();
    const int delay = Uniform(rng, 0, max_delay_ms);
    absl::SleepFor(absl::Milliseconds(delay));
    const pid_t pid = FindLaunchedChild(job.pid(), role, rank);
    EXPECT_GT(pid, 0) << "no " << role << " " << rank << " among the launcher's children";
    if (pid > 0) EXPECT_EQ(::kill(pid, sig), 0);
    std::cout << "seed " << ChaosSeed() << ": signal " << sig << " to " << role << " " << rank << " " << delay
              << " ms after \"" << text << "\"" << std::endl;
    return absl::Now();
  }

  // Waits for `who`'s line with `text` after the strike; prints and returns the time since `since`.
  double TimeUntil(absl::Time since, const std::string& who, const std::string& text) {
    const size_t found = WaitForLine(job, who, text, kLineTimeout, at == std::string::npos ? 0 : at);
    EXPECT_NE(found, std::string::npos) << "never saw " << who << " " << text << ":\n" << job.output();
    const double s = absl::ToDoubleSeconds(absl::Now() - since);
    std::cout << absl::StrFormat("recovery time: %.2f s (until %s %s)", s, who, text) << std::endl;
    ::testing::Test::RecordProperty("recovery_seconds", absl::StrFormat("%.2f", s));
    return s;
  }

  // The job ends with exit 0 and both workers hold the reference weights.
  void ExpectExactEnd(const std::string& ref) {
    const int code = job.Wait(kRunTimeout);
    const std::string& out = job.output();
    ASSERT_EQ(code, 0) << out;
    const std::vector<std::string> got = FinalWeights(out);
    ASSERT_EQ(got.size(), 2u) << out;
    EXPECT_EQ(got[0], ref) << out;
    EXPECT_EQ(got[1], ref) << out;
  }

  std::mt19937_64 rng;
  Subprocess job;
  size_t at = 0;
};

std::string BatchLine(int epoch, int batch) { return absl::StrCat("Epoch[", epoch, "] Batch [", batch, "]"); }

TEST(ChaosTest, WorkerKilledMidStep) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  Chaos c(1);
  const int epoch = Uniform(c.rng, 0, 1);
  const int batch = Uniform(c.rng, 1, kBatches - 2);
  const absl::Time t = c.Strike("[worker 1]", BatchLine(epoch, batch), 30, "worker", 1, SIGKILL);
  c.TimeUntil(t, "[worker 1]", "caught up: step");
  c.ExpectExactEnd(ref);
  EXPECT_NE(c.job.output().find("restarting worker 1 (1 of 3): killed by signal 9"), std::string::npos)
      << c.job.output();
}

TEST(ChaosTest, WorkerZeroKilledMidStep) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  Chaos c(2);
  const int epoch = Uniform(c.rng, 0, 1);
  const int batch = Uniform(c.rng, 1, kBatches - 2);
  const absl::Time t = c.Strike("[worker 0]", BatchLine(epoch, batch), 30, "worker", 0, SIGKILL);
  c.TimeUntil(t, "[worker 0]", "caught up: step");
  c.ExpectExactEnd(ref);
}

TEST(ChaosTest, WorkerKilledDuringInit) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  Chaos c(3);
  // Registered with the scheduler, somewhere in connecting, the servers' start-up
  // configuration, the init barrier or the first pull.
  const absl::Time t = c.Strike("[worker 1]", "joined the job", 400, "worker", 1, SIGKILL);
  c.TimeUntil(t, "[worker 1]", "caught up: step");
  c.ExpectExactEnd(ref);
}

TEST(ChaosTest, WorkerKilledWhileWorkerZeroSavesACheckpoint) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  Chaos c(4);
  const absl::Time t = c.Strike("[worker 0]", "Epoch[0] Time cost", 20, "worker", 1, SIGKILL);
  c.TimeUntil(t, "[worker 1]", "caught up: step");
  c.ExpectExactEnd(ref);
}

TEST(ChaosTest, WorkerZeroKilledDuringItsCheckpointSave) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  Chaos c(5);
  const absl::Time t = c.Strike("[worker 0]", "Epoch[0] Time cost", 40, "worker", 0, SIGKILL);
  c.TimeUntil(t, "[worker 0]", "caught up: step");
  c.ExpectExactEnd(ref);
}

TEST(ChaosTest, SchedulerKilledMidEpoch) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  Chaos c(6);
  const int batch = Uniform(c.rng, 1, kBatches - 2);
  const absl::Time t = c.Strike("[worker 0]", BatchLine(0, batch), 30, "scheduler", 0, SIGKILL);
  c.TimeUntil(t, "[worker 1]", "registered again with the scheduler");
  c.ExpectExactEnd(ref);
}

// 8 s: past the 3 s heartbeat timeout, short of gRPC's keepalive window (10 s ping +
// 10 s timeout). A worker stopped for 25 s lost its connection to a server about one run
// in five with OpenBLAS installed (faster steps; older binaries too):
// the server end reset it, the worker failed its step, and the job ended. Recovering
// from that (reconnect and resend the step's pushes, which servers count once) is left to do.
TEST(ChaosTest, WorkerPausedPastItsHeartbeatTimeoutComesBack) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  // Declared dead after 3 s of silence, well inside the pause.
  Chaos c(7, {{"DTRAIN_HEARTBEAT_TIMEOUT", "3"}});
  const int batch = Uniform(c.rng, 1, kBatches - 2);
  c.Strike("[worker 1]", BatchLine(0, batch), 30, "worker", 1, SIGSTOP);
  ASSERT_NE(WaitForLine(c.job, "[worker 0]", "the scheduler reports worker 1 dead", absl::Seconds(20), c.at),
            std::string::npos)
      << c.job.output();
  absl::SleepFor(absl::Seconds(8));
  const pid_t pid = FindLaunchedChild(c.job.pid(), "worker", 1);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  c.ExpectExactEnd(ref);
  EXPECT_NE(c.job.output().find("worker 1 is back after being declared dead"), std::string::npos) << c.job.output();
  EXPECT_EQ(c.job.output().find("restarting worker"), std::string::npos) << c.job.output();
}

}  // namespace
}  // namespace dtrain::testing
