// dist_async recovery (docs/recovery.md): a worker SIGKILLed mid-epoch under `dtrain
// launch --max-restarts` rejoins, goes on after its last accepted push on the same data
// order, and the run's accuracy stays close to an uninterrupted one's (async has
// no common step, so no bit-exact end). Runs alone (RUN_SERIAL): async's figures depend
// on the workers' relative speed, which other tests on the machine would disturb.
#include <signal.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(6);
constexpr absl::Duration kLineTimeout = absl::Minutes(3);

// The mean of the workers' final validation accuracies (-1 when not two of them).
double MeanFinalAccuracy(const std::string& output) {
  const std::vector<std::string> v = ValuesAfter(output, "Validation-accuracy", "Training done");
  double sum = 0;
  for (const std::string& text : v) {
    double a = 0;
    if (!absl::SimpleAtod(text, &a)) return -1;
    sum += a;
  }
  return v.size() == 2 ? sum / 2 : -1;
}

// Optimizer updates the two servers applied, from their "stopping (...): N updates applied"
// lines (-1 when not two of them). Async applies every accepted push once and acknowledges a
// repeated (rank, step, key) without applying it, so this is exactly workers x steps x keys.
int64_t UpdatesApplied(const std::string& output) {
  int64_t sum = 0;
  int servers = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StrContains(line, "[server ") || !absl::StrContains(line, " updates applied to ")) continue;
    const size_t end = line.find(" updates applied to ");
    const size_t start = line.rfind(' ', end - 1);
    int64_t n = 0;
    if (start == absl::string_view::npos || !absl::SimpleAtoi(line.substr(start + 1, end - start - 1), &n)) return -1;
    sum += n;
    ++servers;
  }
  return servers == 2 ? sum : -1;
}

TEST(AsyncRejoinTest, KilledWorkerRejoinsAndAccuracyHolds) {
  // Async workers end on weights pulled at different moments; a small learning rate
  // over 3 epochs keeps that spread to a few tenths of a point (measured), so the
  // comparison can be this tight.
  auto argv = [](const std::string& prefix, bool restarts) {
    std::vector<std::string> a = {Bin("dtrain"), "launch", "-n", "2", "-s", "2", "--kv-store", "dist_async"};
    if (restarts) {
      for (const char* f : {"--max-restarts", "3", "--restart-backoff", "0.1"}) a.push_back(f);
    }
    for (const char* f : {"--", "--network", "mlp", "--lr", "0.01", "--num-epochs", "3", "--num-examples", "20000",
                          "--num-test-examples", "2000", "--seed", "11", "--disp-batches", "1"}) {
      a.push_back(f);
    }
    a.push_back("--model-prefix");
    a.push_back(prefix);
    return a;
  };
  auto [ref_code, ref_out] = RunToEnd(argv(MakeTempDir() + "/ref", false), kRunTimeout);
  ASSERT_EQ(ref_code, 0) << ref_out;
  const double ref = MeanFinalAccuracy(ref_out);
  ASSERT_GT(ref, 0.5) << ref_out;
  const int64_t ref_updates = UpdatesApplied(ref_out);
  // 2 workers x 3 epochs x 156 steps x the keys (mlp's weights and biases, fc1 cut in several).
  ASSERT_GT(ref_updates, 0) << ref_out;
  ASSERT_EQ(ref_updates % (2 * 3 * 156), 0) << ref_out;

  std::mt19937_64 rng(ChaosSeed() * 1000003 + 8);
  Subprocess job(argv(MakeTempDir() + "/m", true));
  const int batch = std::uniform_int_distribution<int>(5, 150)(rng);  // 156 steps per epoch
  ASSERT_NE(WaitForLine(job, "[worker 1]", absl::StrCat("Epoch[0] Batch [", batch, "]"), kLineTimeout),
            std::string::npos)
      << job.output();
  const pid_t pid = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  const std::string& out = job.output();
  EXPECT_NE(out.find("going on at step"), std::string::npos) << out;
  const double got = MeanFinalAccuracy(out);
  ASSERT_GT(got, 0) << out;
  std::cout << absl::StrFormat("dist_async accuracy: %.4f uninterrupted, %.4f with worker 1 killed at batch %d", ref,
                               got, batch)
            << std::endl;
  // The exact check: every step of every worker reached every key once. A replacement that
  // skipped the dead incarnation's unfinished step loses 6 updates or more; one that redid
  // steps the servers had already applied (instead of their being acknowledged and ignored)
  // adds some.
  EXPECT_EQ(UpdatesApplied(out), ref_updates) << out;
  // Accuracy only as a sanity bound. Two uninterrupted runs of this configuration already
  // differ by 0.2 to 4 points depending on the machine's load (async order: CI once saw 3.4
  // with the count above exact), so the 1-point goal cannot be asserted from one short run.
  // A rejoin that trained on the wrong weights or data would be far further off than 6.
  EXPECT_NEAR(got, ref, 0.06) << out;
}

}  // namespace
}  // namespace dtrain::testing
