// `dtrain export --format safetensors` and the worker's --save-safetensors on the
// checkpoint of a real (one-process) LeNet run, checked by Python: names (the model's
// named_parameters), shapes and every value against the .params file. Bad input
// (a missing epoch, a corrupt .params) fails naming the file and writes nothing.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(180);
constexpr char kPython[] = "/usr/bin/python3";

std::string Checker() { return std::string(DTRAIN_SOURCE_DIR) + "/tests/integration/export/check_safetensors.py"; }

class ExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = MakeTempDir();
    prefix_ = dir_ + "/lenet";
    auto [code, out] = RunToEnd(
        {Bin("dtrain-worker"), "--kv-store", "local", "--network", "lenet", "--num-epochs", "1", "--num-examples",
         "1000", "--num-test-examples", "200", "--threads", "1", "--model-prefix", prefix_, "--save-safetensors"},
        kTimeout);
    code_ = code;
    out_ = out;
  }
  void SetUp() override { ASSERT_EQ(code_, 0) << out_; }

  static std::pair<int, std::string> Check(const std::string& safetensors, const std::string& params) {
    return RunToEnd({kPython, Checker(), safetensors, params, "conv1.weight", "conv1.bias", "fc2.weight"}, kTimeout);
  }

  static inline std::string dir_, prefix_, out_;
  static inline int code_ = -1;
};

TEST_F(ExportTest, WorkerWritesSafetensorsBesideEachEpoch) {
  EXPECT_TRUE(absl::StrContains(out_, "Saved safetensors to \"" + prefix_ + "-0001.safetensors\"")) << out_;
  auto [code, out] = Check(prefix_ + "-0001.safetensors", prefix_ + "-0001.params");
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "names conv1.weight,conv1.bias,conv2.weight")) << out;
  EXPECT_TRUE(absl::StrContains(out, "\"network\": \"lenet\"")) << out;
}

TEST_F(ExportTest, ExportCommandWritesWhatPythonLoads) {
  const std::string output = dir_ + "/exported.safetensors";
  auto [code, out] = RunToEnd(
      {Bin("dtrain"), "export", prefix_, "--epoch", "1", "--format", "safetensors", "--output", output}, kTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "wrote " + output)) << out;
  auto [check_code, check_out] = Check(output, prefix_ + "-0001.params");
  EXPECT_EQ(check_code, 0) << check_out;
  EXPECT_TRUE(absl::StrContains(check_out, "\"source\": \"lenet-0001.params\"")) << check_out;
}

// The flag vocabulary of every other command: --model-prefix names the prefix too.
TEST_F(ExportTest, ModelPrefixFlagNamesThePrefixAsThePositionalDoes) {
  const std::string output = dir_ + "/by-flag.safetensors";
  auto [code, out] =
      RunToEnd({Bin("dtrain"), "export", "--model-prefix", prefix_, "--epoch", "1", "--output", output}, kTimeout);
  ASSERT_EQ(code, 0) << out;
  auto [check_code, check_out] = Check(output, prefix_ + "-0001.params");
  EXPECT_EQ(check_code, 0) << check_out;
  auto [twice, twice_out] =
      RunToEnd({Bin("dtrain"), "export", prefix_, "--model-prefix", prefix_ + "x", "--epoch", "1"}, kTimeout);
  EXPECT_EQ(twice, 2) << twice_out;
  EXPECT_TRUE(absl::StrContains(twice_out, "the prefix is given twice")) << twice_out;
}

TEST_F(ExportTest, MissingEpochFailsNamingTheFileAndWritesNothing) {
  const std::string output = dir_ + "/missing.safetensors";
  auto [code, out] = RunToEnd({Bin("dtrain"), "export", prefix_, "--epoch", "7", "--output", output}, kTimeout);
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, prefix_ + "-0007.params does not exist (epochs there: 1)")) << out;
  EXPECT_FALSE(std::filesystem::exists(output));
}

TEST_F(ExportTest, CorruptParamsFailAndWriteNothing) {
  const std::string bad = dir_ + "/bad";
  std::filesystem::copy_file(prefix_ + "-0001.params", bad + "-0001.params");
  {
    std::fstream f(bad + "-0001.params", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  auto [code, out] = RunToEnd({Bin("dtrain"), "export", bad, "--epoch", "1"}, kTimeout);
  EXPECT_EQ(code, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, bad + "-0001.params")) << out;
  EXPECT_TRUE(absl::StrContains(out, "CRC")) << out;
  EXPECT_FALSE(std::filesystem::exists(bad + "-0001.safetensors"));
}

TEST_F(ExportTest, UsageErrors) {
  auto [code, out] = RunToEnd({Bin("dtrain"), "export", prefix_}, kTimeout);
  EXPECT_EQ(code, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "--epoch N is required")) << out;
  auto [fcode, fout] = RunToEnd({Bin("dtrain"), "export", prefix_, "--epoch", "1", "--format", "onnx"}, kTimeout);
  EXPECT_EQ(fcode, 2) << fout;
  EXPECT_TRUE(absl::StrContains(fout, "--format must be safetensors")) << fout;
}

}  // namespace
}  // namespace dtrain::testing
