// DeviceCopies through its interface: on CPU devices (here) the synchronous copies; on a
// machine whose LibTorch has CUDA and a GPU (deploy/gpu-verify.sh) the same checks run the
// stream-ordered copies of device_copies_cuda.cc, which CI only compiles.
#include "services/worker/device_copies.h"

#include <torch/cuda.h>

#include <vector>

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

// Host tensors in, device tensors out and back: every value arrives, the staging of one
// step does not leak into the next, and the master's tensors get (pinned, on GPUs) gradients.
void ExpectRoundTrips(const std::vector<torch::Device>& devices) {
  std::unique_ptr<DeviceCopies> copies = MakeDeviceCopies(devices);
  torch::manual_seed(3);
  std::vector<torch::Tensor> master = {torch::rand({4, 3}).requires_grad_(), torch::rand({5}).requires_grad_()};
  copies->PrepareHost(master);
  for (const torch::Tensor& p : master) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(p.grad().is_cpu());
    EXPECT_EQ(p.grad().sizes(), p.sizes());
    EXPECT_EQ(p.grad().abs().sum().item<float>(), 0.0f);
    if (devices[0].is_cuda()) {
      EXPECT_TRUE(p.is_pinned()) << "the weights the kvstore writes are copied to the GPU";
      EXPECT_TRUE(p.grad().is_pinned()) << "the gradients the GPU writes";
    }
  }
  // Two steps per replica, with different batches: the second must not see the first's.
  for (int step = 0; step < 2; ++step) {
    for (size_t r = 0; r < devices.size(); ++r) {
      torch::Tensor x = torch::rand({6, 1, 2, 2});
      torch::Tensor y = torch::randint(0, 10, {6}, torch::kInt64);
      absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> got = copies->ToReplica(static_cast<int>(r), x, y);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->first.device(), devices[r]);
      EXPECT_TRUE(torch::equal(got->first.cpu(), x)) << "step " << step << ", replica " << r;
      EXPECT_TRUE(torch::equal(got->second.cpu(), y)) << "step " << step << ", replica " << r;
    }
  }
  ASSERT_TRUE(copies->AwaitReplicas().ok());
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> on_device, grads;
  for (const torch::Tensor& p : master) {
    on_device.push_back(torch::rand(p.sizes()).to(devices[0]));
    grads.push_back(p.grad());
  }
  ASSERT_TRUE(copies->ToHost(on_device, grads).ok());
  for (size_t i = 0; i < master.size(); ++i) EXPECT_TRUE(torch::equal(master[i].grad(), on_device[i].cpu()));
  ASSERT_TRUE(copies->FromHost(master, on_device).ok());
  for (size_t i = 0; i < master.size(); ++i) EXPECT_TRUE(torch::equal(on_device[i].cpu(), master[i]));
}

TEST(DeviceCopiesTest, CpuDevicesCopyEveryValue) {
  ExpectRoundTrips({torch::Device(torch::kCPU), torch::Device(torch::kCPU)});
}

TEST(DeviceCopiesTest, GpusCopyEveryValueThroughPinnedBuffersAndSideStreams) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device (or a LibTorch without CUDA)";
  std::vector<torch::Device> devices;
  for (size_t g = 0; g < std::min<size_t>(2, torch::cuda::device_count()); ++g) {
    devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(g));
  }
  ExpectRoundTrips(devices);
}

}  // namespace
}  // namespace dtrain::worker
