// A worker SIGKILLed mid-epoch is restarted with its rank by `dtrain launch
// --max-restarts`; the replacement asks the servers which step is unfinished, redoes it
// from the same weights and batch, and the job ends with the uninterrupted run's weights.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);

std::vector<std::string> Launch(const std::vector<std::string>& launch_flags, const std::string& prefix) {
  std::vector<std::string> argv = {Bin("dtrain"), "launch", "-n", "2", "-s", "2"};
  argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
  for (const char* f : {"--", "--network", "lenet", "--num-epochs", "2", "--num-examples", "6000", "--seed", "7",
                        "--disp-batches", "10"}) {
    argv.push_back(f);
  }
  argv.push_back("--model-prefix");
  argv.push_back(prefix);
  return argv;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The launcher's child running worker `rank` (by its DTRAIN_RANK and command line).
pid_t FindWorker(pid_t launcher, int rank) {
  const std::string want = "DTRAIN_RANK=" + std::to_string(rank);
  const std::vector<std::string> children = absl::StrSplit(
      ReadFile("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children"), ' ',
      absl::SkipWhitespace());
  for (const std::string& c : children) {
    std::string env = ReadFile("/proc/" + c + "/environ");
    std::string cmd = ReadFile("/proc/" + c + "/cmdline");
    std::vector<std::string> vars = absl::StrSplit(env, '\0');
    bool has_rank = false;
    for (const auto& v : vars) has_rank |= v == want;
    int pid = 0;
    if (has_rank && cmd.find("worker") != std::string::npos && absl::SimpleAtoi(c, &pid)) return pid;
  }
  return -1;
}

TEST(WorkerRejoinTest, KilledWorkerRestartsAndTheJobEndsBitIdentical) {
  const std::string dir = MakeTempDir();
  auto [ref_code, ref_out] = RunToEnd(Launch({}, dir + "/ref"), kRunTimeout);
  ASSERT_EQ(ref_code, 0) << ref_out;
  const std::vector<std::string> ref = ValuesAfter(ref_out, "weights-fnv64", "Training done");
  ASSERT_EQ(ref.size(), 2u) << ref_out;
  ASSERT_EQ(ref[0], ref[1]);

  // The scheduler and the workers wait for a dead worker up to the rejoin timeout; a
  // short heartbeat timeout makes the death known soon.
  Subprocess job(Launch({"--max-restarts", "1", "--restart-on", "signal"}, dir + "/rec"),
                 {{"DTRAIN_REJOIN_TIMEOUT", "60"}, {"DTRAIN_HEARTBEAT_TIMEOUT", "2"}});
  ASSERT_TRUE(job.WaitForOutput("Epoch[0] Batch [10]", absl::Seconds(120))) << job.output();
  const pid_t worker1 = FindWorker(job.pid(), 1);
  ASSERT_GT(worker1, 0) << "no worker 1 among the launcher's children";
  ASSERT_EQ(kill(worker1, SIGKILL), 0);
  const int code = job.Wait(kRunTimeout);
  const std::string out = job.output();
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("redoing step"), std::string::npos) << out;
  const std::vector<std::string> got = ValuesAfter(out, "weights-fnv64", "Training done");
  ASSERT_EQ(got.size(), 2u) << out;
  EXPECT_EQ(got[0], ref[0]) << out;
  EXPECT_EQ(got[1], ref[0]) << out;
}

}  // namespace
}  // namespace dtrain::testing
