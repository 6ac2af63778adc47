// Servers: snapshots and rollback, with the real binaries. A 2-worker,
// 2-server dist_sync job under `dtrain launch --max-restarts --snapshot-every 50`
// loses server 1 (SIGKILL) mid-epoch after its snapshot of step 50; the launcher
// restarts it on its port, the scheduler rolls the whole job back to step 50 (the
// newest step both servers hold), and the job ends with exit 0 and the final weights
// of an uninterrupted run with the same seed, bit for bit: the steps after the
// snapshot are recomputed on the same data.
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(6);
constexpr absl::Duration kLineTimeout = absl::Minutes(3);

// 3000 examples over 2 workers at batch 64: 23 steps per epoch, 69 in all.
std::vector<std::string> Argv(const std::string& prefix, bool snapshots) { return SnapshotRecipe(prefix, snapshots); }

TEST(SnapshotRollbackTest, ServerKilledMidEpochRollsBackToItsSnapshotAndEndsBitIdentical) {
  auto [ref_code, ref_out] = RunToEnd(Argv(MakeTempDir() + "/ref", false), kRunTimeout);
  ASSERT_EQ(ref_code, 0) << ref_out;
  const std::vector<std::string> ref = FinalWeights(ref_out);
  ASSERT_EQ(ref.size(), 2u) << ref_out;

  const std::string prefix = MakeTempDir() + "/m";
  Subprocess job(Argv(prefix, true));
  ASSERT_NE(WaitForLine(job, "[server 1]", "snapshot of step 50", kLineTimeout), std::string::npos) << job.output();
  // Step 2 * 23 + 10 = 56: six steps past the snapshot, which the rollback recomputes.
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[2] Batch [10]", kLineTimeout), std::string::npos) << job.output();
  const pid_t server = FindLaunchedChild(job.pid(), "server", 1);
  ASSERT_GT(server, 0);
  ASSERT_EQ(::kill(server, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  const size_t resumed = WaitForLine(job, "[worker 1]", "after the rollback", kLineTimeout);
  ASSERT_NE(resumed, std::string::npos) << job.output();
  std::cout << "rollback time: " << absl::ToDoubleSeconds(absl::Now() - killed)
            << " s (server 1 killed to worker 1 resuming at step 50)" << std::endl;

  const int code = job.Wait(kRunTimeout);
  const std::string& out = job.output();
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> got = FinalWeights(out);
  ASSERT_EQ(got.size(), 2u) << out;
  EXPECT_EQ(got[0], ref[0]) << out;
  EXPECT_EQ(got[1], ref[0]) << out;
  EXPECT_NE(out.find("restarting server 1 (1 of 3): killed by signal 9"), std::string::npos) << out;
  EXPECT_NE(out.find("to step 50: server 1 lost its shard"), std::string::npos) << out;
  // The snapshots sit beside the model prefix, the newest two per server.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(prefix + "-snapshots")) {
    files += e.path().extension() == ".snapshot" ? 1 : 0;
  }
  EXPECT_GE(files, 2);
  EXPECT_LE(files, 4);
}

}  // namespace
}  // namespace dtrain::testing
