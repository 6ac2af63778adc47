// A distributed job whose gradients blow up (learning rate 1e30) ends non-zero with an
// error naming the step and rank instead of training on poisoned weights. The worker's
// own check stops it before it pushes (so no server is poisoned); a push that got past
// it is refused by the server (hostile_client_test sends one).
//
// DTRAIN_HOSTILE_BIN_DIR=/path/to/bin runs other binaries (e.g. an old build).
#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

std::string LauncherBin() {
  const char* dir = std::getenv("DTRAIN_HOSTILE_BIN_DIR");
  return dir != nullptr ? std::string(dir) + "/dtrain" : Bin("dtrain");
}

// The default step (--overlap) has pushed the gradients that were finite before the
// check; --no-overlap pushes nothing. Either way the job ends naming step and rank.
void ExpectNaNEndsTheJob(const std::vector<std::string>& worker_flags, const std::string& pushed) {
  const std::string dir = MakeTempDir();
  std::vector<std::string> argv = {LauncherBin(), "launch",
                                   "-n",          "1",
                                   "-s",          "1",
                                   "--",          "--network",
                                   "lenet",       "--num-epochs",
                                   "1",           "--num-examples",
                                   "600",         "--lr",
                                   "1e30",        "--model-prefix",
                                   dir + "/m"};
  argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
  const auto [code, output] = RunToEnd(argv, absl::Seconds(120));
  EXPECT_NE(code, -1) << "timed out:\n" << output;
  EXPECT_NE(code, 0) << "the job trained on NaN weights and succeeded:\n" << output;
  EXPECT_THAT(output, MatchesRegex("(.|\n)*\\[worker 0\\][^\n]* E training failed: step [0-9]+ on rank 0: "
                                   "training diverged: loss [-+]?(nan|inf)(.|\n)*"));
  EXPECT_THAT(output, HasSubstr(pushed));
  // Which child the launcher reaps first (the worker, or a server told the job failed) varies.
  EXPECT_THAT(output,
              MatchesRegex("(.|\n)*dtrain launch: (worker|server) 0 exited with status 1; stopped the others(.|\n)*"));
}

TEST(NonFiniteJobTest, ANaNGradientEndsTheDistributedJobNamingStepAndRank) {
  ExpectNaNEndsTheJob({}, "only the finite gradients were pushed (--overlap)");
}

TEST(NonFiniteJobTest, ANaNGradientEndsTheSequentialJobWithNothingPushed) {
  ExpectNaNEndsTheJob({"--no-overlap"}, "nothing was pushed for this step");
}

}  // namespace
}  // namespace dtrain::testing
