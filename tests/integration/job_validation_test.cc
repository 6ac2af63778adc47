// The job-wide validation (each worker evaluates its part of the 10,000 test
// images, the parts' counts combined through the scheduler) is what ONE process scoring
// all 10,000 with the same weights gets. The job's checkpoint is served by dtrain-infer
// and `dtrain predict --images --labels` (no --limit) scores the whole labelled t10k.
//
// Tolerance: none. The trainer prints the accuracy with %f (6 decimals) and predict
// prints the count of right answers; for 10,000 images correct/10000 has at most 4
// decimals, so the two must agree exactly. (predict sends the uint8 pixels, which
// dtrain-infer divides by 255 with the same LibTorch op as the worker's data set.)
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/inference/infer_process.h"

namespace dtrain::testing {
namespace {

using grpc::health::v1::HealthCheckResponse;

// Trains LeNet for one short epoch with `workers` workers and 2 servers, then checks the
// logged job-wide Validation-accuracy of that (last) epoch against predict's over t10k.
void ExpectJobValidationEqualsOneProcess(int workers) {
  const std::string dir = MakeTempDir();
  const std::string prefix = dir + "/lenet";
  auto [code, out] =
      RunToEnd({Bin("dtrain"), "launch", "-n", std::to_string(workers), "-s", "2", "--kv-store", "dist_sync", "--",
                "--network", "lenet", "--num-epochs", "1", "--num-examples", "6000", "--model-prefix", prefix},
               absl::Minutes(5));
  ASSERT_EQ(code, 0) << out;
  // Combined over the whole test set (rank 0's job line says so), and the same on every worker.
  EXPECT_TRUE(std::regex_search(
      out, std::regex(absl::StrCat(R"(Epoch\[0\] Job: )", workers, R"( workers\t[^\n]*\t10000 test images)"))))
      << out;
  const std::vector<std::string> job = ValuesAfter(out, "Validation-accuracy", "Epoch[0] Validation-accuracy");
  ASSERT_EQ(job.size(), static_cast<size_t>(workers)) << out;
  for (const std::string& v : job) EXPECT_EQ(v, job[0]) << out;
  double job_accuracy = -1;
  ASSERT_TRUE(absl::SimpleAtod(job[0], &job_accuracy)) << job[0];

  // Epoch 0's weights are checkpoint 1.
  InferProcess server({"--model-prefix", prefix, "--epoch", "1"});
  ASSERT_TRUE(server.WaitForHealth(HealthCheckResponse::SERVING, absl::Seconds(30))) << server.process().output();
  const std::string data = kDataDir;
  // Calls of 1000 images, the chunk the trainer evaluates in (the answers do not depend on it).
  auto [pcode, pout] =
      RunToEnd({Bin("dtrain"), "predict", "--server", server.address(), "--images", data + "/t10k-images-idx3-ubyte.gz",
                "--labels", data + "/t10k-labels-idx1-ubyte.gz", "--batch", "1000"},
               absl::Minutes(3));
  ASSERT_EQ(pcode, 0) << pout;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(pout, m, std::regex(R"(accuracy=[0-9.]+ \(([0-9]+) of ([0-9]+) right\))"))) << pout;
  ASSERT_EQ(m[2].str(), "10000") << pout;
  const int right = std::stoi(m[1].str());
  EXPECT_EQ(absl::StrFormat("%.6f", right / 10000.0), job[0])
      << "one process over t10k: " << right << " of 10000 right; the job logged " << job[0];
  EXPECT_EQ(server.Stop(), 0);
  std::filesystem::remove_all(dir);
}

TEST(JobValidationTest, TwoWorkersAgreeWithOneProcessOverTheWholeTestSet) { ExpectJobValidationEqualsOneProcess(2); }

// 10000 / 3 does not divide: parts of 3333, 3333 and 3334 images.
TEST(JobValidationTest, ThreeWorkersUnevenPartsAgreeWithOneProcess) { ExpectJobValidationEqualsOneProcess(3); }

}  // namespace
}  // namespace dtrain::testing
