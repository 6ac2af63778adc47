// DeviceReplicas on CPU "devices" with the CpuAggregator (the code a GPU worker runs,
// without a GPU): the replicas' summed gradients are the whole batch's, the step's loss
// and hits are the batch's, and LoadWeights gives every replica the master's weights.
#include "services/worker/device_replicas.h"

#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

std::shared_ptr<models::Network> Mlp() {
  absl::StatusOr<std::shared_ptr<models::Network>> net = models::CreateNetwork("mlp");
  EXPECT_TRUE(net.ok()) << net.status();
  return *net;
}

struct Fixture {
  std::shared_ptr<models::Network> master;
  std::unique_ptr<DeviceReplicas> replicas;
};

Fixture Make(int n) {
  torch::manual_seed(7);
  Fixture f{Mlp(), nullptr};
  std::vector<std::shared_ptr<models::Network>> nets;
  std::vector<torch::Device> devices;
  for (int r = 0; r < n; ++r) {
    nets.push_back(Mlp());  // other initial weights: Create must overwrite them
    devices.emplace_back(torch::kCPU);
  }
  absl::StatusOr<std::unique_ptr<DeviceReplicas>> d =
      DeviceReplicas::Create(*f.master, std::move(nets), std::move(devices), std::make_unique<CpuAggregator>(n));
  EXPECT_TRUE(d.ok()) << d.status();
  if (d.ok()) f.replicas = *std::move(d);
  return f;
}

// The single-device step on the whole batch, on a copy of the master.
std::vector<torch::Tensor> ReferenceGradients(models::Network& master, const torch::Tensor& x, const torch::Tensor& y,
                                              double* loss) {
  std::shared_ptr<models::Network> ref = Mlp();
  {
    torch::NoGradGuard no_grad;
    auto from = master.parameters();
    auto to = ref->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  torch::Tensor l = torch::nn::functional::cross_entropy(ref->forward(x), y);
  l.backward();
  *loss = l.item<double>();
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : ref->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

void ExpectStepMatchesOneDevice(int replicas, int64_t batch) {
  Fixture f = Make(replicas);
  ASSERT_NE(f.replicas, nullptr);
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::kInt64);
  double ref_loss = 0;
  std::vector<torch::Tensor> ref = ReferenceGradients(*f.master, x, y, &ref_loss);
  absl::StatusOr<DeviceReplicas::StepResult> step = f.replicas->Step(x, y, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_NEAR(step->loss, ref_loss, 1e-5);
  std::vector<torch::Tensor> got = f.master->parameters();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_TRUE(torch::allclose(got[i].grad(), ref[i], /*rtol=*/1e-4, /*atol=*/1e-6))
        << "parameter " << i << " with " << replicas << " replicas, batch " << batch;
  }
  torch::Tensor logits = f.master->forward(x);
  EXPECT_EQ(step->correct, logits.argmax(1).eq(y).sum().item<int64_t>());
}

TEST(DeviceReplicasTest, TwoReplicasComputeTheWholeBatchsGradient) { ExpectStepMatchesOneDevice(2, 16); }

TEST(DeviceReplicasTest, UnevenSlicesAreWeightedBySize) { ExpectStepMatchesOneDevice(3, 7); }

TEST(DeviceReplicasTest, ABatchSmallerThanTheReplicasLeavesTheLastIdle) { ExpectStepMatchesOneDevice(3, 2); }

TEST(DeviceReplicasTest, ReplicasStartWithAndReloadTheMastersWeights) {
  Fixture f = Make(2);
  ASSERT_NE(f.replicas, nullptr);
  for (int r = 0; r < 2; ++r) {
    auto rp = f.replicas->replica(r).parameters();
    auto mp = f.master->parameters();
    for (size_t i = 0; i < mp.size(); ++i) EXPECT_TRUE(torch::equal(rp[i], mp[i])) << "replica " << r;
  }
  {
    torch::NoGradGuard no_grad;
    for (torch::Tensor& p : f.master->parameters()) p.add_(0.5);  // what a pull writes
  }
  ASSERT_TRUE(f.replicas->LoadWeights(absl::Now() + absl::Seconds(10)).ok());
  for (int r = 0; r < 2; ++r) {
    auto rp = f.replicas->replica(r).parameters();
    auto mp = f.master->parameters();
    for (size_t i = 0; i < mp.size(); ++i) EXPECT_TRUE(torch::equal(rp[i], mp[i])) << "replica " << r;
  }
}

TEST(DeviceReplicasTest, OneReplicaPerDeviceAndAggregatorSlot) {
  std::shared_ptr<models::Network> master = Mlp();
  absl::StatusOr<std::unique_ptr<DeviceReplicas>> d =
      DeviceReplicas::Create(*master, {Mlp(), Mlp()}, {torch::Device(torch::kCPU), torch::Device(torch::kCPU)},
                             std::make_unique<CpuAggregator>(3));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
}

}  // namespace
}  // namespace dtrain::worker
