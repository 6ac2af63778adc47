// Beyond MNIST, end to end with real processes: a CIFAR-10-format data set
// (data_batch_1.bin ... data_batch_5.bin, test_batch.bin, batches.meta.txt) written
// here, since CIFAR-10 cannot be downloaded on the test machines; `dtrain launch` trains
// the CIFAR-style resnet 20 on it; the symbol file records the data's shape and classes;
// dtrain-infer serves it and `dtrain predict` classifies 32x32 colour images.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/inference/infer_process.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);
constexpr int kPerBatch = 40;  // records per training batch file: 200 training images
constexpr int kTest = 40;

// Record i of a file: label i % 10; each class its own colour (a learnable signal)
// plus noise from a fixed LCG, so every run writes the same bytes.
std::string Records(int count, uint32_t seed) {
  std::string out;
  uint32_t x = seed;
  for (int i = 0; i < count; ++i) {
    const int label = i % 10;
    out.push_back(static_cast<char>(label));
    for (int c = 0; c < 3; ++c) {
      const int base = (label * 37 + c * 80) % 200;
      for (int p = 0; p < 32 * 32; ++p) {
        x = x * 1664525u + 1013904223u;
        out.push_back(static_cast<char>(base + static_cast<int>((x >> 24) % 56)));
      }
    }
  }
  return out;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  ASSERT_TRUE(f.good()) << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The class names the data set gives (batches.meta.txt), not CIFAR-10's own.
const std::vector<std::string> kNames = {"c-zero", "c-one", "c-two",   "c-three", "c-four",
                                         "c-five", "c-six", "c-seven", "c-eight", "c-nine"};

std::string WriteCifar() {
  const std::string dir = MakeTempDir() + "/cifar";
  std::filesystem::create_directories(dir);
  for (int b = 1; b <= 5; ++b) WriteFile(absl::StrCat(dir, "/data_batch_", b, ".bin"), Records(kPerBatch, b));
  WriteFile(dir + "/test_batch.bin", Records(kTest, 99));
  std::string meta;
  for (const std::string& n : kNames) absl::StrAppend(&meta, n, "\n");
  WriteFile(dir + "/batches.meta.txt", meta + "\n");
  return dir;
}

std::vector<std::string> Launch(int servers, const std::string& data, std::vector<std::string> extra,
                                std::vector<std::string> launch_flags = {}) {
  std::vector<std::string> argv = {Bin("dtrain"),           "launch",     "-n",       "2", "-s",
                                   std::to_string(servers), "--kv-store", "dist_sync"};
  argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
  for (const char* f : {"--", "--network", "resnet", "--num-layers", "20", "--data-dir"}) argv.push_back(f);
  argv.push_back(data);
  for (const char* f : {"--batch-size", "20", "--disp-batches", "1"}) argv.push_back(f);
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TEST(CifarResNetTest, TrainsOneEpochThenServesAndPredictsColourImages) {
  const std::string data = WriteCifar();
  const std::string prefix = MakeTempDir() + "/c10";
  auto [code, out] = RunToEnd(Launch(2, data, {"--num-epochs", "1", "--model-prefix", prefix}), kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "cifar10, 200 training and 40 test images of 3x32x32, 10 classes from")) << out;
  EXPECT_TRUE(absl::StrContains(out, "random crop and flip")) << out;
  const auto fnv0 = ValuesAfter(out, "weights-fnv64", "[worker 0]");
  ASSERT_EQ(fnv0.size(), 1u) << out;
  EXPECT_EQ(fnv0, ValuesAfter(out, "weights-fnv64", "[worker 1]")) << "workers ended with different state";

  // The symbol file follows the data.
  absl::StatusOr<checkpoint::SymbolInfo> sym = checkpoint::ReadSymbol(prefix);
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->network, "resnet");
  EXPECT_EQ(sym->num_layers, 20);
  EXPECT_EQ(sym->input_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(sym->num_classes, 10);
  EXPECT_EQ(sym->class_names, kNames);
  // Batch-norm statistics and the input normalisation are in the checkpoint, after the
  // weights (they are not kvstore keys).
  absl::StatusOr<std::vector<checkpoint::NamedTensor>> params = checkpoint::ReadParams(prefix + "-0001.params");
  ASSERT_TRUE(params.ok()) << params.status();
  std::vector<std::string> names;
  for (const auto& t : *params) names.push_back(t.name);
  EXPECT_EQ(names.front(), "stem.0.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "blocks.8.b2.running_var"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "input_mean"), names.end());

  InferProcess infer({"--model-prefix", prefix});
  ASSERT_TRUE(infer.started()) << infer.process().output();
  auto [pcode, pout] = RunToEnd({Bin("dtrain"), "predict", "--server", infer.address(), "--images",
                                 data + "/test_batch.bin", "--limit", "20", "--render", prefix + "-pred.png"},
                                absl::Minutes(1));
  ASSERT_EQ(pcode, 0) << pout << infer.process().output();
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(pout, '\n')) {
    if (absl::StartsWith(line, "#") && absl::StrContains(line, "true=c-")) ++lines;
  }
  EXPECT_EQ(lines, 20) << pout;
  EXPECT_TRUE(absl::StrContains(pout, "accuracy=")) << pout;
  EXPECT_TRUE(absl::StrContains(pout, "resnet epoch 1")) << pout;
  EXPECT_TRUE(std::filesystem::exists(prefix + "-pred.png"));
  // IDX labels do not go with a CIFAR batch, which has its own.
  auto [bad, bad_out] = RunToEnd({Bin("dtrain"), "predict", "--server", infer.address(), "--images",
                                  data + "/test_batch.bin", "--labels", data + "/x"},
                                 absl::Minutes(1));
  EXPECT_NE(bad, 0);
  EXPECT_TRUE(absl::StrContains(bad_out, "carries its labels")) << bad_out;
}

// Batch norm keeps state outside the kvstore: a run resumed from its epoch-1 checkpoint
// must still end exactly as an uninterrupted one (weights, statistics, .params bytes).
TEST(CifarResNetTest, ResumeIsBitIdentical) {
  const std::string data = WriteCifar();
  const std::string dir = MakeTempDir();
  auto straight = RunToEnd(Launch(1, data, {"--num-epochs", "2", "--model-prefix", dir + "/a"}), kRunTimeout);
  ASSERT_EQ(straight.first, 0) << straight.second;
  auto first = RunToEnd(Launch(1, data, {"--num-epochs", "1", "--model-prefix", dir + "/b"}), kRunTimeout);
  ASSERT_EQ(first.first, 0) << first.second;
  auto resumed =
      RunToEnd(Launch(1, data, {"--num-epochs", "2", "--load-epoch", "1", "--model-prefix", dir + "/b"}), kRunTimeout);
  ASSERT_EQ(resumed.first, 0) << resumed.second;
  EXPECT_EQ(ValuesAfter(straight.second, "weights-fnv64", "[worker 0]"),
            ValuesAfter(resumed.second, "weights-fnv64", "[worker 0]"));
  EXPECT_EQ(ValuesAfter(straight.second, "weights-fnv64", "[worker 1]"),
            ValuesAfter(resumed.second, "weights-fnv64", "[worker 1]"));
  EXPECT_EQ(ValuesAfter(straight.second, "Validation-accuracy", "[worker 1]").back(),
            ValuesAfter(resumed.second, "Validation-accuracy", "[worker 1]").back());
  const std::string a = ReadFile(dir + "/a-0002.params");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, ReadFile(dir + "/b-0002.params"));
}

// A worker 0 killed mid-epoch and restarted rejoins with fresh batch-norm buffers; the
// statistics are recomputed from the weights at the epoch's end, so its checkpoints and
// final state are still those of the uninterrupted run, bit for bit.
TEST(CifarResNetTest, RejoinedWorkerEndsBitIdentical) {
  const std::string data = WriteCifar();
  const std::string dir = MakeTempDir();
  auto straight = RunToEnd(Launch(1, data, {"--num-epochs", "2", "--model-prefix", dir + "/a"}), kRunTimeout);
  ASSERT_EQ(straight.first, 0) << straight.second;
  Subprocess job(Launch(1, data, {"--num-epochs", "2", "--model-prefix", dir + "/b"}, {"--max-restarts", "1"}));
  ASSERT_NE(WaitForLine(job, "[worker 0]", "Epoch[1] Batch [2]", kRunTimeout), std::string::npos) << job.output();
  const pid_t worker0 = FindLaunchedChild(job.pid(), "worker", 0);
  ASSERT_GT(worker0, 0) << job.output();
  ASSERT_EQ(kill(worker0, SIGKILL), 0);
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  EXPECT_TRUE(absl::StrContains(job.output(), "restarting worker 0")) << job.output();
  const std::vector<std::string> want = FinalWeights(straight.second);
  ASSERT_EQ(want.size(), 2u) << straight.second;
  EXPECT_EQ(FinalWeights(job.output()), want) << job.output();
  const std::string a = ReadFile(dir + "/a-0002.params");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, ReadFile(dir + "/b-0002.params"));
}

}  // namespace
}  // namespace dtrain::testing
