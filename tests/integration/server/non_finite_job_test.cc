// A job whose gradients blow up (learning rate 1e30): the server refuses the first
// NaN push, the worker's error names key, step and rank, and the job ends non-zero
// instead of training on poisoned weights.
//
// DTRAIN_HOSTILE_BIN_DIR=/path/to/bin runs other binaries (e.g. an old build).
#include <cstdlib>
#include <string>

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

TEST(NonFiniteJobTest, ANaNGradientEndsTheJobWithTheServersReason) {
  const std::string dir = MakeTempDir();
  const auto [code, output] =
      RunToEnd({LauncherBin(), "launch", "-n", "1", "-s", "1", "--", "--network", "lenet", "--num-epochs", "1",
                "--num-examples", "600", "--lr", "1e30", "--model-prefix", dir + "/m"},
               absl::Seconds(120));
  EXPECT_NE(code, -1) << "timed out:\n" << output;
  EXPECT_NE(code, 0) << "the job trained on NaN weights and succeeded:\n" << output;
  EXPECT_THAT(output, HasSubstr("training failed: server 0 at 127.0.0.1:"));
  EXPECT_THAT(output, MatchesRegex("(.|\n)*push of key [0-9]+ at step [0-9]+ by worker 0: gradient element [0-9]+ "
                                   "is (NaN|[+-]Inf)(.|\n)*"));
  EXPECT_THAT(output, HasSubstr("--allow-non-finite"));
}

}  // namespace
}  // namespace dtrain::testing
