// Recovery with model replicas (--cpu-replicas 1: the --gpus path on the CPU, bit for bit
// the host model's step): a worker killed mid-step rejoins, and a server that loses its
// shard rolls the job back; either way the replicas must be given the weights the worker
// resumes from, and the job ends with the recovery tests' uninterrupted weights.
#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(6);
const std::vector<std::string> kOneReplica = {"--cpu-replicas", "1"};

TEST(DeviceReplicasRecoveryTest, AWorkerKilledMidStepRejoinsAndTheWeightsAreTheReference) {
  const std::string ref = ChaosReference(kRunTimeout);
  ASSERT_FALSE(ref.empty());
  Subprocess job(ChaosRecipe(MakeTempDir() + "/m", {"--max-restarts", "3", "--restart-backoff", "0.1"}, kOneReplica));
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[0] Batch [9]", absl::Minutes(3)), std::string::npos) << job.output();
  const pid_t victim = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(victim, 0) << job.output();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ASSERT_NE(WaitForLine(job, "[worker 1]", "caught up: step", absl::Minutes(3)), std::string::npos) << job.output();
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  EXPECT_NE(job.output().find("training 1 model replica on the CPU"), std::string::npos) << job.output();
  EXPECT_EQ(FinalWeights(job.output()), (std::vector<std::string>{ref, ref})) << job.output();
}

TEST(DeviceReplicasRecoveryTest, AServerKilledRollsBackAndTheWeightsAreTheReference) {
  const std::string ref = ChaosReference(kRunTimeout);
  ASSERT_FALSE(ref.empty());
  Subprocess job(ChaosRecipe(MakeTempDir() + "/m",
                             {"--max-restarts", "3", "--restart-backoff", "0.1", "--snapshot-every", "10"},
                             kOneReplica));
  ASSERT_NE(WaitForLine(job, "[server 1]", "snapshot of step 20", absl::Minutes(3)), std::string::npos) << job.output();
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[1] Batch [2]", absl::Minutes(3)), std::string::npos) << job.output();
  const pid_t server = FindLaunchedChild(job.pid(), "server", 1);
  ASSERT_GT(server, 0) << job.output();
  ASSERT_EQ(::kill(server, SIGKILL), 0);
  ASSERT_NE(WaitForLine(job, "[worker 1]", "after the rollback", absl::Minutes(3)), std::string::npos) << job.output();
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  EXPECT_EQ(FinalWeights(job.output()), (std::vector<std::string>{ref, ref})) << job.output();
}

}  // namespace
}  // namespace dtrain::testing
