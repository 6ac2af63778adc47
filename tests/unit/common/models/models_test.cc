#include "common/models/models.h"

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::models {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::pair<std::string, std::vector<int64_t>>> ParamShapes(models::Network& net) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& p : net.named_parameters()) {
    out.emplace_back(p.key(), p.value().sizes().vec());
  }
  return out;
}

int64_t ParamCount(models::Network& net) {
  int64_t n = 0;
  for (const auto& p : net.parameters()) n += p.numel();
  return n;
}

TEST(ModelsTest, KnownNetworks) { EXPECT_THAT(models::KnownNetworks(), ElementsAre("mlp", "lenet")); }

TEST(ModelsTest, OutputShapes) {
  torch::NoGradGuard no_grad;
  for (const std::string& name : models::KnownNetworks()) {
    for (int classes : {10, 3}) {
      absl::StatusOr<std::shared_ptr<models::Network>> net = models::CreateNetwork(name, classes);
      ASSERT_TRUE(net.ok()) << net.status();
      EXPECT_EQ((*net)->name(), name);
      torch::Tensor out = (*net)->forward(torch::rand({4, 1, 28, 28}));
      EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{4, classes})) << name;
      EXPECT_EQ(out.scalar_type(), torch::kFloat);
    }
  }
}

TEST(ModelsTest, LeNetParameters) {
  std::shared_ptr<models::Network> net = *models::CreateNetwork("lenet", 10);
  using P = std::pair<std::string, std::vector<int64_t>>;
  EXPECT_THAT(ParamShapes(*net),
              ElementsAre(P{"conv1.weight", {20, 1, 5, 5}}, P{"conv1.bias", {20}},
                          P{"conv2.weight", {50, 20, 5, 5}}, P{"conv2.bias", {50}},
                          P{"fc1.weight", {500, 800}}, P{"fc1.bias", {500}},
                          P{"fc2.weight", {10, 500}}, P{"fc2.bias", {10}}));
  // 520 + 25,050 + 400,500 + 5,010: the size of MXNet's lenet on 28x28 inputs.
  EXPECT_EQ(ParamCount(*net), 431080);
}

TEST(ModelsTest, MlpParameters) {
  std::shared_ptr<models::Network> net = *models::CreateNetwork("mlp", 10);
  using P = std::pair<std::string, std::vector<int64_t>>;
  EXPECT_THAT(ParamShapes(*net), ElementsAre(P{"fc1.weight", {128, 784}}, P{"fc1.bias", {128}},
                                             P{"fc2.weight", {64, 128}}, P{"fc2.bias", {64}},
                                             P{"fc3.weight", {10, 64}}, P{"fc3.bias", {10}}));
  EXPECT_EQ(ParamCount(*net), 100480 + 8256 + 650);
}

// --hidden 2048,2048: the layers of torch_fmnist.py's MLP([2048, 2048]) (784 -> 2048 ->
// 2048 -> 10, relu), named as MXNet's mlp names its layers.
TEST(ModelsTest, WideMlpHasTheReferenceShape) {
  std::shared_ptr<models::Network> net = *models::CreateNetwork(NetworkSpec{"mlp", {2048, 2048}}, 10);
  using P = std::pair<std::string, std::vector<int64_t>>;
  EXPECT_THAT(ParamShapes(*net), ElementsAre(P{"fc1.weight", {2048, 784}}, P{"fc1.bias", {2048}},
                                             P{"fc2.weight", {2048, 2048}}, P{"fc2.bias", {2048}},
                                             P{"fc3.weight", {10, 2048}}, P{"fc3.bias", {10}}));
  // torch_fmnist.py --network mlp --hidden 2048,2048 reports "model_bytes": 23298088.
  EXPECT_EQ(ParamCount(*net), 784 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10);
  EXPECT_EQ(ParamCount(*net) * 4, 23298088);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(net->forward(torch::rand({3, 1, 28, 28})).sizes().vec(), (std::vector<int64_t>{3, 10}));

  // Any depth: one fc per hidden width, then the output layer.
  net = *models::CreateNetwork(NetworkSpec{"mlp", {32, 16, 8}}, 4);
  EXPECT_THAT(ParamShapes(*net), ElementsAre(P{"fc1.weight", {32, 784}}, P{"fc1.bias", {32}},
                                             P{"fc2.weight", {16, 32}}, P{"fc2.bias", {16}},
                                             P{"fc3.weight", {8, 16}}, P{"fc3.bias", {8}},
                                             P{"fc4.weight", {4, 8}}, P{"fc4.bias", {4}}));
}

// The default mlp is built exactly as before --hidden existed: for a seed, the same
// initial weights as three Linear layers made one after the other (so fixed-seed runs
// keep their weights), and the same as --hidden 128,64.
TEST(ModelsTest, DefaultMlpKeepsItsInitialWeights) {
  torch::manual_seed(7);
  std::shared_ptr<models::Network> net = *models::CreateNetwork("mlp", 10);
  torch::manual_seed(7);
  torch::nn::Linear fc1(784, 128), fc2(128, 64), fc3(64, 10);
  torch::manual_seed(7);
  std::shared_ptr<models::Network> explicit_default = *models::CreateNetwork(NetworkSpec{"mlp", {128, 64}}, 10);
  std::vector<torch::Tensor> want = {fc1->weight, fc1->bias, fc2->weight, fc2->bias, fc3->weight, fc3->bias};
  std::vector<torch::Tensor> got = net->parameters();
  std::vector<torch::Tensor> got_explicit = explicit_default->parameters();
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got_explicit.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(torch::equal(got[i], want[i])) << "parameter " << i;
    EXPECT_TRUE(torch::equal(got_explicit[i], want[i])) << "parameter " << i;
  }
}

TEST(ModelsTest, BadArgumentsAreErrors) {
  absl::Status s = models::CreateNetwork("resnet").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("resnet"), HasSubstr("mlp, lenet")));
  EXPECT_EQ(models::CreateNetwork("lenet", 0).status().code(), absl::StatusCode::kInvalidArgument);
  // Hidden widths from a symbol file are checked as the flag's are.
  s = models::CreateNetwork(NetworkSpec{"lenet", {64}}, 10).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("hidden widths are for the mlp"));
  EXPECT_EQ(models::CreateNetwork(NetworkSpec{"mlp", {0}}, 10).status().code(), absl::StatusCode::kInvalidArgument);
}

// A few SGD steps on one tiny batch must fit it: the loss falls well below its start.
TEST(ModelsTest, SgdStepsReduceLoss) {
  torch::manual_seed(0);
  for (const std::string& name : models::KnownNetworks()) {
    std::shared_ptr<models::Network> net = *models::CreateNetwork(name, 10);
    torch::Tensor x = torch::rand({8, 1, 28, 28});
    torch::Tensor y = torch::arange(8, torch::kLong);
    torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    float first = 0, last = 0;
    for (int step = 0; step < 15; ++step) {
      sgd.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      loss.backward();
      sgd.step();
      if (step == 0) first = loss.item<float>();
      last = loss.item<float>();
    }
    EXPECT_LT(last, 0.5f * first) << name << ": loss " << first << " -> " << last;
  }
}

}  // namespace
}  // namespace dtrain::models
