// What a user reads while a job trains, from real processes:
//   - the Speedometer line with "batch N/M" and an ETA,
//   - MXNet's "Update[N]: Change learning rate to X" where the factor schedule changes it,
//   - validation split over the workers and combined: every worker prints the same
//     accuracy (of the whole test set: a whole number of images right) and a
//     cross-entropy, and worker 0 one job-wide line with all workers' samples/s,
//   - one log prefix, "[worker 0] ", whether `dtrain launch` or the process writes it.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);

std::vector<std::string> Lines(const std::string& out, const std::string& a, const std::string& b = "") {
  std::vector<std::string> found;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, a) && absl::StrContains(line, b)) found.emplace_back(line);
  }
  return found;
}

double Value(const std::vector<std::string>& values, size_t i) {
  double v = -1;
  if (i < values.size()) EXPECT_TRUE(absl::SimpleAtod(values[i], &v)) << values[i];
  return v;
}

// 2000 examples over 2 workers at batch 50: 20 batches per epoch; the rate halves
// after epoch 1, i.e. from the update of step 20 on (MXNet's num_update 21).
TEST(ProgressLogTest, TwoWorkerRunLogsProgressRateChangesAndCombinedValidation) {
  const std::string dir = MakeTempDir();
  auto [code, out] = RunToEnd({Bin("dtrain"), "launch",
                               "-n",          "2",
                               "-s",          "1",
                               "--kv-store",  "dist_sync",
                               "--",          "--network",
                               "mlp",         "--num-epochs",
                               "2",           "--num-examples",
                               "2000",        "--num-test-examples",
                               "1001",        "--batch-size",
                               "50",          "--disp-batches",
                               "5",           "--lr",
                               "0.05",        "--lr-factor",
                               "0.5",         "--lr-step-epochs",
                               "1",           "--threads",
                               "1",           "--model-prefix",
                               dir + "/mlp"},
                              kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  for (const std::string who : {"[worker 0]", "[worker 1]"}) {
    const std::vector<std::string> progress = Lines(out, who, "Epoch[1] Batch [15]\tSpeed: ");
    ASSERT_EQ(progress.size(), 1u) << out;
    EXPECT_TRUE(absl::StrContains(progress[0], "\tTrain-accuracy=")) << progress[0];
    EXPECT_TRUE(absl::StrContains(progress[0], "\tbatch 15/20\teta 0:")) << progress[0];
    EXPECT_TRUE(absl::StrContains(progress[0], " (epoch), 0:")) << progress[0];
    EXPECT_TRUE(absl::StrContains(progress[0], " (run)")) << progress[0];
    const std::vector<std::string> lr = Lines(out, who, "Update[");
    ASSERT_EQ(lr.size(), 1u) << out;
    EXPECT_TRUE(absl::EndsWith(lr[0], "Update[21]: Change learning rate to 2.50000e-02")) << lr[0];
    EXPECT_EQ(Lines(out, who, "Validation-cross-entropy=").size(), 2u) << out;
  }
  // The same accuracy on both workers, and it is of all 1001 images: a whole count.
  const std::vector<std::string> acc0 = ValuesAfter(out, "Validation-accuracy", "[worker 0]");
  const std::vector<std::string> acc1 = ValuesAfter(out, "Validation-accuracy", "[worker 1]");
  ASSERT_GE(acc0.size(), 2u) << out;
  ASSERT_EQ(acc0, acc1) << out;
  for (size_t e = 0; e < 2; ++e) {
    const double right = Value(acc0, e) * 1001;
    EXPECT_NEAR(right, std::round(right), 1e-3) << acc0[e];
    EXPECT_GT(Value(acc0, e), 0.3) << acc0[e];
  }
  const std::vector<std::string> job = Lines(out, "[worker 0]", "Epoch[1] Job: 2 workers\tSpeed: ");
  ASSERT_EQ(job.size(), 1u) << out;
  EXPECT_TRUE(absl::StrContains(job[0], "samples/sec\t2000 samples\t1001 test images")) << job[0];
  EXPECT_TRUE(Lines(out, "[worker 1]", "Job: ").empty()) << "worker 0 alone prints the job-wide line";
}

// A process started by hand (as on Kubernetes) prefixes its own lines as the launcher
// does: "[worker 0] " first.
TEST(ProgressLogTest, HandStartedWorkerPrefixesItsLinesLikeTheLauncher) {
  auto [code, out] =
      RunToEnd({Bin("dtrain-worker"), "--kv-store", "local", "--network", "mlp", "--num-epochs", "1", "--num-examples",
                "500", "--num-test-examples", "300", "--disp-batches", "2", "--threads", "1"},
               kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> lines = Lines(out, "Epoch[0] Batch [2]\tSpeed: ");
  ASSERT_EQ(lines.size(), 1u) << out;
  EXPECT_TRUE(absl::StartsWith(lines[0], "[worker 0] ")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], "\tbatch 2/7\teta ")) << lines[0];
  const std::vector<std::string> validation = Lines(out, "Epoch[0] Validation-accuracy=");
  ASSERT_EQ(validation.size(), 1u) << out;
  EXPECT_TRUE(absl::StartsWith(validation[0], "[worker 0] ")) << validation[0];
  EXPECT_EQ(Lines(out, "Epoch[0] Job: 1 worker\tSpeed: ", "300 test images").size(), 1u) << out;
}

}  // namespace
}  // namespace dtrain::testing
