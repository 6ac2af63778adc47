// --gpus against this worker's LibTorch: with no GPUs the host model alone, --cpu-replicas
// CPU devices; on a LibTorch without CUDA (Debian's, CI's) a refusal that says so; with CUDA
// a missing GPU by name.
#include "services/worker/gpu_devices.h"

#include <torch/cuda.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

TEST(GpuDevicesTest, NoGpusAreTheHostModelAlone) {
  EXPECT_TRUE(CheckGpusForTorch({}).ok());
  absl::StatusOr<WorkerDevices> d = PrepareDevices({}, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->devices.empty());
  EXPECT_EQ(d->aggregator, nullptr);
}

TEST(GpuDevicesTest, CpuReplicasAreCpuDevicesWithTheCpuAggregator) {
  absl::StatusOr<WorkerDevices> d = PrepareDevices({}, 3);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->devices.size(), 3u);
  for (const torch::Device& dev : d->devices) EXPECT_TRUE(dev.is_cpu());
  ASSERT_NE(d->aggregator, nullptr);
  EXPECT_EQ(d->aggregator->num_replicas(), 3);
  EXPECT_EQ(d->description, "the CPU (--cpu-replicas 3)");
  EXPECT_EQ(PrepareDevices({0}, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GpuDevicesTest, ALibTorchWithoutCudaRefusesGpusSayingSo) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this LibTorch has CUDA and a device";
  const std::string expected = "--gpus 0: this worker's LibTorch has no CUDA (torch::cuda::is_available() is false)";
  absl::Status checked = CheckGpusForTorch({0});
  EXPECT_EQ(checked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(checked.message(), expected);
  absl::Status prepared = PrepareDevices({0}, 0).status();
  EXPECT_EQ(prepared, checked) << "the worker gets the same answer at start";
  EXPECT_EQ(CheckGpusForTorch({0, 1}).message(),
            "--gpus 0,1: this worker's LibTorch has no CUDA (torch::cuda::is_available() is false)");
}

TEST(GpuDevicesTest, AGpuBeyondWhatLibTorchSeesIsRefusedNamingTheCount) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (or a LibTorch without CUDA)";
  const int count = static_cast<int>(torch::cuda::device_count());
  absl::Status s = CheckGpusForTorch({0, count});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), absl::StrCat("--gpus 0,", count, ": GPU ", count, " does not exist: LibTorch sees ", count,
                                      " CUDA device(s)"));
  EXPECT_TRUE(CheckGpusForTorch({0}).ok());
}

}  // namespace
}  // namespace dtrain::worker
