// Gradient compression end to end: `dtrain launch` with --gc-type 2bit
// trains LeNet, every dist_sync worker ends with the same weights, the wire carries
// 1/16 of the float32 bytes (and the pull, following the push, a quarter), and a worker killed mid-run rejoins (its
// residual is lost: the job goes on, not bit-identical to an uninterrupted one). With
// --pull-gc-type the pulls are packed too, the workers still agree bit for bit, and
// since the pull's residual lives on the servers a killed worker's recovery stays exact.
#include <signal.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(4);

std::vector<std::string> Launch(std::vector<std::string> launch_flags, const std::vector<std::string>& worker_flags) {
  std::vector<std::string> argv = {Bin("dtrain"), "launch"};
  argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
  return argv;
}

double Accuracy(const std::string& out, const std::string& who) {
  const std::vector<std::string> v = ValuesAfter(out, "Validation-accuracy", who);
  double acc = -1;
  if (!v.empty()) EXPECT_TRUE(absl::SimpleAtod(v.back(), &acc)) << v.back();
  return acc;
}

// The float32 bytes over the bytes on the wire that worker `who` logged at the end for
// `what`: "pushed ([0-9]+) bytes on the wire" (the push) or "pulled ([0-9]+) bytes" (the pull).
double LoggedRatio(const std::string& out, const std::string& who, const std::string& what) {
  const std::regex re(std::regex_replace(who, std::regex(R"([\[\]])"), R"(\$&)") + "[^\n]*" + what +
                      R"( for ([0-9]+) bytes)");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return -1;
  return std::stod(m[2].str()) / std::stod(m[1].str());
}
double Ratio(const std::string& out, const std::string& who) {
  return LoggedRatio(out, who, "pushed ([0-9]+) bytes on the wire");
}
double PullRatio(const std::string& out, const std::string& who) {
  return LoggedRatio(out, who, "pulled ([0-9]+) bytes");
}

TEST(CompressionTest, TwoBitLenetLearnsWithWorkersBitIdenticalAndSixteenfoldLessPushed) {
  auto [code, out] = RunToEnd(Launch({"-n", "2", "-s", "2", "--kv-store", "dist_sync"},
                                     {"--network", "lenet", "--num-epochs", "1", "--num-examples", "6000", "--seed",
                                      "7", "--gc-type", "2bit", "--gc-threshold", "0.5"}),
                              kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  // MXNet's threshold is on gradients summed over the batch; ours are means over 64.
  EXPECT_NE(out.find("gradient compression 2bit (threshold 0.5 for gradients summed over the batch, 0.0078125 on "
                     "its mean)"),
            std::string::npos)
      << out;
  const std::vector<std::string> fnv0 = ValuesAfter(out, "weights-fnv64", "[worker 0]");
  const std::vector<std::string> fnv1 = ValuesAfter(out, "weights-fnv64", "[worker 1]");
  ASSERT_EQ(fnv0.size(), 1u) << out;
  ASSERT_EQ(fnv1.size(), 1u) << out;
  EXPECT_EQ(fnv0[0], fnv1[0]) << "compressed dist_sync workers ended with different weights";
  // Measured 0.739 (uncompressed: 0.734) after these 46 steps of 64 per worker; 0.664
  // before the push residual was bounded, short values rounded at random and the pull
  // made to follow the push (weights e23999be8b6907a5 then, 6e0eeb713d3dfcb2 now, on the
  // machine that measured them). 0.70 fails the MXNet-style 2bit of before.
  EXPECT_GE(Accuracy(out, "[worker 0]"), 0.70) << out;
  EXPECT_EQ(Accuracy(out, "[worker 0]"), Accuracy(out, "[worker 1]"));
  // 16 values per 32-bit word; LeNet's slices are nearly all multiples of 16.
  EXPECT_GT(Ratio(out, "[worker 0]"), 15.9) << out;
  EXPECT_LE(Ratio(out, "[worker 0]"), 16.0) << out;
  // No --pull-gc-type: the pull follows the compressed push, as int8 (the ratio as in
  // the test below).
  EXPECT_NE(out.find("pull compression int8"), std::string::npos) << out;
  EXPECT_GT(PullRatio(out, "[worker 0]"), 3.6) << out;
}

TEST(CompressionTest, BothWaysLenetLearnsWithWorkersBitIdentical) {
  auto [code, out] = RunToEnd(Launch({"-n", "2", "-s", "2", "--kv-store", "dist_sync"},
                                     {"--network", "lenet", "--num-epochs", "1", "--num-examples", "6000", "--seed",
                                      "7", "--gc-type", "2bit", "--gc-threshold", "0.5", "--pull-gc-type", "int8"}),
                              kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("pull compression int8"), std::string::npos) << out;
  const std::vector<std::string> fnv = FinalWeights(out);
  ASSERT_EQ(fnv.size(), 2u) << out;
  EXPECT_EQ(fnv[0], fnv[1]) << "dist_sync workers with packed pulls ended with different weights";
  // Measured 0.66 with the pushes alone packed (the test above); int8 pulls cost little.
  EXPECT_GE(Accuracy(out, "[worker 0]"), 0.60) << out;
  EXPECT_GT(Ratio(out, "[worker 0]"), 15.9) << out;
  // A byte per value and a scale per key, after a first pull of the float32 weights:
  // 46 steps packed + 1 full = 47 * 4 / (46 + 4) = 3.76 for LeNet's 11 keys.
  EXPECT_GT(PullRatio(out, "[worker 0]"), 3.6) << out;
  EXPECT_LT(PullRatio(out, "[worker 0]"), 4.0) << out;
}

TEST(CompressionTest, PackedPullsRecoverExactlyFromAKilledWorker) {
  // The pull's residual is server state (saved, snapshotted, replicated): a worker
  // that replaces a dead one pulls the exact weights of the step to redo and then the
  // same packed changes as everyone, so the run ends where the uninterrupted one does.
  const std::vector<std::string> pull = {"--pull-gc-type", "int8"};
  const std::string ref = SharedReference(
      "pull-int8-reference", ChaosRecipe(MakeTempDir() + "/ref", {"--kv-store", "dist_sync"}, pull), 2, kRunTimeout);
  ASSERT_FALSE(ref.empty());
  ASSERT_NE(ref, ChaosReference(kRunTimeout)) << "int8 pulls changed nothing: the comparison tests nothing";
  Subprocess job(ChaosRecipe(MakeTempDir() + "/m",
                             {"--kv-store", "dist_sync", "--max-restarts", "1", "--restart-backoff", "0.2"}, pull));
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[0] Batch [8]", absl::Minutes(3)), std::string::npos) << job.output();
  const pid_t pid = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(pid, 0) << job.output();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  const std::string& out = job.output();
  EXPECT_NE(out.find("rejoined the job as worker 1"), std::string::npos) << out;
  EXPECT_EQ(FinalWeights(out), (std::vector<std::string>{ref, ref})) << out;
}

TEST(CompressionTest, KilledWorkerRejoinsWithoutItsResidual) {
  Subprocess job(
      Launch({"-n", "2", "-s", "1", "--kv-store", "dist_sync", "--max-restarts", "1", "--restart-backoff", "0.2"},
             // 1bit with momentum 0.9 wanders on this mlp (0.50 after 6000 examples, 0.17
             // after 20000, uninterrupted, with OpenBLAS); README advises a lower --mom
             // with lossy pushes. With 0.5 an uninterrupted run reaches 0.63.
             {"--network", "mlp", "--num-epochs", "1", "--num-examples", "12000", "--disp-batches", "5", "--gc-type",
              "1bit", "--mom", "0.5"}));
  const size_t at = WaitForLine(job, "[worker 1]", "Epoch[0] Batch [10]", absl::Seconds(60));
  ASSERT_NE(at, std::string::npos) << job.output();
  const pid_t pid = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(pid, 0) << job.output();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  const std::string& out = job.output();
  EXPECT_NE(out.find("restarting worker 1"), std::string::npos) << out;
  EXPECT_NE(out.find("rejoined the job as worker 1"), std::string::npos) << out;
  // dist_sync: whatever the residuals, every worker pulls the same weights.
  const std::vector<std::string> fnv = FinalWeights(out);
  ASSERT_EQ(fnv.size(), 2u) << out;
  EXPECT_EQ(fnv[0], fnv[1]) << out;
  EXPECT_GE(Accuracy(out, "[worker 0]"), 0.5) << out;
}

}  // namespace
}  // namespace dtrain::testing
