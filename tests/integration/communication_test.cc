// Communication with the real binaries. Bounded staleness (--kv-store
// dist_ssp --staleness S): S = 0 is dist_sync bit for bit, and a worker that stops holds
// the others to at most S steps ahead of it (they wait, they do not fail), after which
// the job completes with every worker holding the same weights. Overlap (--overlap):
// gradients leave from backward, last layer first, and the weights are the same.
#include <signal.h>

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(6);

// The recovery chaos tests' job (ChaosRecipe, 23 steps per epoch) in `kv_store`.
std::vector<std::string> Argv(const std::string& prefix, const std::string& kv_store, int staleness,
                              std::vector<std::string> worker_flags = {}) {
  if (kv_store == "dist_ssp") {
    worker_flags.push_back("--staleness");
    worker_flags.push_back(std::to_string(staleness));
  }
  return ChaosRecipe(prefix, {"--kv-store", kv_store}, worker_flags);
}

// The highest N of `who`'s "Epoch[0] Batch [N]" lines (steps of epoch 0 it finished).
int LastBatch(const std::string& out, const std::string& who) {
  int last = 0;
  const std::regex line(std::string("\\[") + who + "\\][^\\n]*Epoch\\[0\\] Batch \\[([0-9]+)\\]");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    int n = 0;
    if (absl::SimpleAtoi((*it)[1].str(), &n)) last = std::max(last, n);
  }
  return last;
}

TEST(SspTest, StalenessZeroEndsBitIdenticalToDistSync) {
  const std::string ref = ChaosReference(kRunTimeout);
  ASSERT_FALSE(ref.empty());
  auto [code, out] = RunToEnd(Argv(MakeTempDir() + "/m", "dist_ssp", 0), kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("configured: dist_ssp (staleness 0)"), std::string::npos) << out;
  EXPECT_EQ(FinalWeights(out), (std::vector<std::string>{ref, ref})) << out;
}

TEST(OverlapTest, GradientsLeaveFromBackwardLastLayerFirstAndTheWeightsAreTheSame) {
  const std::string ref = ChaosReference(kRunTimeout);
  ASSERT_FALSE(ref.empty());
  auto [code, out] = RunToEnd(Argv(MakeTempDir() + "/m", "dist_sync", 0, {"--overlap"}), kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(FinalWeights(out), (std::vector<std::string>{ref, ref})) << out;
  // LeNet's parameters are conv1, conv2, fc1, fc2 (weight, bias each): backward
  // produces fc2's first, so the first early push is one of the last two.
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(out, m, std::regex("\\[worker 0\\][^\\n]*overlap: [^\\n]*the first: parameter ([0-9]+) of 8")))
      << out;
  EXPECT_GE(std::stoi(m[1].str()), 6) << m[0];
  // The pulls overlap the next forward too, which waits for each layer's weights.
  EXPECT_NE(out.find("overlap: each step's weights arrive during the next forward"), std::string::npos) << out;
  // LeNet on 2 servers: MXNet's bound would leave fc1 whole on one of them, so it is cut
  // into keys of 50176 (placement.h's AutoChunkElems), and no advice follows.
  EXPECT_NE(out.find("placement: parameters above 50176 elements are cut into keys of that many"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("would spread them"), std::string::npos) << out;
}

// With --overlap a step's weights are still arriving when the next forward starts, so a
// failure lands in the middle of a forward. Recovery must stay exact: a worker killed
// mid-step rejoins and redoes its step, and the job ends with the reference weights.
TEST(OverlapTest, AWorkerKilledMidStepRejoinsAndTheWeightsAreTheSame) {
  const std::string ref = ChaosReference(kRunTimeout);
  ASSERT_FALSE(ref.empty());
  Subprocess job(ChaosRecipe(MakeTempDir() + "/m", {"--max-restarts", "3", "--restart-backoff", "0.1"}, {"--overlap"}));
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[0] Batch [9]", absl::Minutes(3)), std::string::npos) << job.output();
  const pid_t victim = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(victim, 0) << job.output();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ASSERT_NE(WaitForLine(job, "[worker 1]", "caught up: step", absl::Minutes(3)), std::string::npos) << job.output();
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  EXPECT_EQ(FinalWeights(job.output()), (std::vector<std::string>{ref, ref})) << job.output();
}

// ... and a server that loses its shard rolls the job back to the snapshot, which the
// workers may learn in a forward's wait for a layer: the same weights again.
TEST(OverlapTest, AServerKilledRollsBackAndTheWeightsAreTheSame) {
  const std::string ref = ChaosReference(kRunTimeout);
  ASSERT_FALSE(ref.empty());
  Subprocess job(ChaosRecipe(MakeTempDir() + "/m",
                             {"--max-restarts", "3", "--restart-backoff", "0.1", "--snapshot-every", "10"},
                             {"--overlap"}));
  ASSERT_NE(WaitForLine(job, "[server 1]", "snapshot of step 20", absl::Minutes(3)), std::string::npos) << job.output();
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[1] Batch [2]", absl::Minutes(3)), std::string::npos) << job.output();
  const pid_t server = FindLaunchedChild(job.pid(), "server", 1);
  ASSERT_GT(server, 0) << job.output();
  ASSERT_EQ(::kill(server, SIGKILL), 0);
  ASSERT_NE(WaitForLine(job, "[worker 1]", "after the rollback", absl::Minutes(3)), std::string::npos) << job.output();
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  EXPECT_EQ(FinalWeights(job.output()), (std::vector<std::string>{ref, ref})) << job.output();
}

TEST(SspTest, AStoppedWorkerHoldsTheOtherWithinTheStalenessBound) {
  constexpr int kStaleness = 2;
  Subprocess job(Argv(MakeTempDir() + "/m", "dist_ssp", kStaleness));
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[0] Batch [3]", absl::Minutes(3)), std::string::npos) << job.output();
  const pid_t slow = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(slow, 0) << job.output();
  ASSERT_EQ(::kill(slow, SIGSTOP), 0);
  // Long enough for worker 0 to run into the bound several times over (a step is tens
  // of ms), short of any timeout.
  absl::SleepFor(absl::Seconds(4));
  const std::string during = job.output();
  const int slow_done = LastBatch(during, "worker 1");
  const int fast_done = LastBatch(during, "worker 0");
  ASSERT_EQ(::kill(slow, SIGCONT), 0);
  // Worker 1 pushed step slow_done - 1, perhaps slow_done too (it may stop between its
  // push and its line): worker 0 finishes steps up to that + S, and no further.
  EXPECT_GE(fast_done, slow_done + kStaleness) << "worker 0 did not run ahead:\n" << during;
  EXPECT_LE(fast_done, slow_done + kStaleness + 1) << "worker 0 broke the bound:\n" << during;
  std::printf("worker 1 stopped after %d steps; worker 0 went on to %d (staleness %d)\n", slow_done, fast_done,
              kStaleness);
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  const std::vector<std::string> fnv = FinalWeights(job.output());
  ASSERT_EQ(fnv.size(), 2u) << job.output();
  EXPECT_EQ(fnv[0], fnv[1]) << "each epoch ends with every worker settled on the same weights";
}

}  // namespace
}  // namespace dtrain::testing
