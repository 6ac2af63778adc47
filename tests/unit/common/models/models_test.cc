#include "common/models/models.h"

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/models/model_state.h"
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

TEST(ModelsTest, KnownNetworks) {
  EXPECT_THAT(models::KnownNetworks(), ElementsAre("mlp", "lenet", "resnet", "resnet18"));
}

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
              ElementsAre(P{"conv1.weight", {20, 1, 5, 5}}, P{"conv1.bias", {20}}, P{"conv2.weight", {50, 20, 5, 5}},
                          P{"conv2.bias", {50}}, P{"fc1.weight", {500, 800}}, P{"fc1.bias", {500}},
                          P{"fc2.weight", {10, 500}}, P{"fc2.bias", {10}}));
  // 520 + 25,050 + 400,500 + 5,010: the size of MXNet's lenet on 28x28 inputs.
  EXPECT_EQ(ParamCount(*net), 431080);
}

// LeNet runs tanh after the pooling, on channels-last activations (models.cc): the
// outputs and gradients must be MXNet's conv -> tanh -> pool, written out here in the
// plain NCHW order. Odd sides check the pooling's floor too.
TEST(ModelsTest, LeNetMatchesConvTanhPoolWrittenOut) {
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, 28, 28}, std::vector<int64_t>{3, 31, 29}}) {
    auto net = *models::CreateNetwork(models::NetworkSpec{"lenet", {}, 0}, 10, shape);
    torch::manual_seed(3);
    torch::Tensor x = torch::randn({5, shape[0], shape[1], shape[2]});
    std::map<std::string, torch::Tensor> p;
    for (const auto& kv : net->named_parameters()) p[kv.key()] = kv.value();
    torch::Tensor h = torch::max_pool2d(torch::tanh(torch::conv2d(x, p["conv1.weight"], p["conv1.bias"])), 2, 2);
    h = torch::max_pool2d(torch::tanh(torch::conv2d(h, p["conv2.weight"], p["conv2.bias"])), 2, 2);
    h = torch::tanh(torch::linear(h.flatten(1), p["fc1.weight"], p["fc1.bias"]));
    torch::Tensor want = torch::linear(h, p["fc2.weight"], p["fc2.bias"]);
    torch::Tensor got = net->forward(x);
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_LE((got - want).abs().max().item<float>(), 1e-5f);

    // Gradients: the same up to the summation order of the convolutions' backward.
    auto grads = [&](const torch::Tensor& out) {
      net->zero_grad();
      out.square().sum().backward();
      std::vector<torch::Tensor> g;
      for (const auto& t : net->parameters()) g.push_back(t.grad().clone());
      return g;
    };
    std::vector<torch::Tensor> g_want = grads(want), g_got = grads(net->forward(x));
    for (size_t i = 0; i < g_want.size(); ++i) {
      EXPECT_TRUE(g_got[i].is_contiguous()) << i;
      EXPECT_TRUE(torch::allclose(g_got[i], g_want[i], 1e-4, 1e-5)) << "parameter " << i;
    }
  }
}

TEST(ModelsTest, MlpParameters) {
  std::shared_ptr<models::Network> net = *models::CreateNetwork("mlp", 10);
  using P = std::pair<std::string, std::vector<int64_t>>;
  EXPECT_THAT(ParamShapes(*net),
              ElementsAre(P{"fc1.weight", {128, 784}}, P{"fc1.bias", {128}}, P{"fc2.weight", {64, 128}},
                          P{"fc2.bias", {64}}, P{"fc3.weight", {10, 64}}, P{"fc3.bias", {10}}));
  EXPECT_EQ(ParamCount(*net), 100480 + 8256 + 650);
}

// --hidden 2048,2048: the layers of torch_reference.py's MLP([2048, 2048]) (784 -> 2048 ->
// 2048 -> 10, relu), named as MXNet's mlp names its layers.
TEST(ModelsTest, WideMlpHasTheReferenceShape) {
  std::shared_ptr<models::Network> net = *models::CreateNetwork(NetworkSpec{"mlp", {2048, 2048}}, 10);
  using P = std::pair<std::string, std::vector<int64_t>>;
  EXPECT_THAT(ParamShapes(*net),
              ElementsAre(P{"fc1.weight", {2048, 784}}, P{"fc1.bias", {2048}}, P{"fc2.weight", {2048, 2048}},
                          P{"fc2.bias", {2048}}, P{"fc3.weight", {10, 2048}}, P{"fc3.bias", {10}}));
  // torch_reference.py --network mlp --hidden 2048,2048 reports "model_bytes": 23298088.
  EXPECT_EQ(ParamCount(*net), 784 * 2048 + 2048 + 2048 * 2048 + 2048 + 2048 * 10 + 10);
  EXPECT_EQ(ParamCount(*net) * 4, 23298088);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(net->forward(torch::rand({3, 1, 28, 28})).sizes().vec(), (std::vector<int64_t>{3, 10}));

  // Any depth: one fc per hidden width, then the output layer.
  net = *models::CreateNetwork(NetworkSpec{"mlp", {32, 16, 8}}, 4);
  EXPECT_THAT(ParamShapes(*net), ElementsAre(P{"fc1.weight", {32, 784}}, P{"fc1.bias", {32}}, P{"fc2.weight", {16, 32}},
                                             P{"fc2.bias", {16}}, P{"fc3.weight", {8, 16}}, P{"fc3.bias", {8}},
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
  absl::Status s = models::CreateNetwork("vgg").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("vgg"), HasSubstr("mlp, lenet, resnet, resnet18")));
  s = models::CreateNetwork(NetworkSpec{"resnet", {}, 21}, 10).status();
  EXPECT_THAT(s.message(), HasSubstr("21 layers is not 6n+2"));
  s = models::CreateNetwork(NetworkSpec{"lenet", {}, 20}, 10).status();
  EXPECT_THAT(s.message(), HasSubstr("the depth is for resnet"));
  s = models::CreateNetwork(NetworkSpec{"lenet", {}}, 10, {1, 12, 12}).status();
  EXPECT_THAT(s.message(), HasSubstr("at least 16x16"));
  s = models::CreateNetwork(NetworkSpec{"resnet", {}}, 10, {28, 28}).status();
  EXPECT_THAT(s.message(), HasSubstr("is not [C,H,W]"));
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

std::string NamesAndShapes(models::Network& net) {
  std::vector<std::string> parts;
  for (const auto& [name, shape] : ParamShapes(net)) {
    parts.push_back(name + ":" + absl::StrJoin(shape, "x"));
  }
  return absl::StrJoin(parts, ",");
}

// The parameters of tests/bench/torch_reference.py's ResNet(20) (1 input channel),
// name:shape in named_parameters() order, as PyTorch prints them: the kvstore keys and
// the .params order follow this, and the benchmark compares against that model.
TEST(ResNetTest, ResNet20MatchesTheReference) {
  std::shared_ptr<models::Network> net = *models::CreateNetwork(NetworkSpec{"resnet", {}, 20}, 10);
  EXPECT_EQ(
      NamesAndShapes(*net),
      "stem.0.weight:16x1x3x3,stem.1.weight:16,stem.1.bias:16,blocks.0.c1.weight:16x16x3x3,"
      "blocks.0.b1.weight:16,blocks.0.b1.bias:16,blocks.0.c2.weight:16x16x3x3,blocks.0.b2.weight:16,"
      "blocks.0.b2.bias:16,blocks.1.c1.weight:16x16x3x3,blocks.1.b1.weight:16,blocks.1.b1.bias:16,"
      "blocks.1.c2.weight:16x16x3x3,blocks.1.b2.weight:16,blocks.1.b2.bias:16,blocks.2.c1.weight:16x16x3x3,"
      "blocks.2.b1.weight:16,blocks.2.b1.bias:16,blocks.2.c2.weight:16x16x3x3,blocks.2.b2.weight:16,"
      "blocks.2.b2.bias:16,blocks.3.c1.weight:32x16x3x3,blocks.3.b1.weight:32,blocks.3.b1.bias:32,"
      "blocks.3.c2.weight:32x32x3x3,blocks.3.b2.weight:32,blocks.3.b2.bias:32,blocks.3.proj.0.weight:32x16x1x1,"
      "blocks.3.proj.1.weight:32,blocks.3.proj.1.bias:32,blocks.4.c1.weight:32x32x3x3,blocks.4.b1.weight:32,"
      "blocks.4.b1.bias:32,blocks.4.c2.weight:32x32x3x3,blocks.4.b2.weight:32,blocks.4.b2.bias:32,"
      "blocks.5.c1.weight:32x32x3x3,blocks.5.b1.weight:32,blocks.5.b1.bias:32,blocks.5.c2.weight:32x32x3x3,"
      "blocks.5.b2.weight:32,blocks.5.b2.bias:32,blocks.6.c1.weight:64x32x3x3,blocks.6.b1.weight:64,"
      "blocks.6.b1.bias:64,blocks.6.c2.weight:64x64x3x3,blocks.6.b2.weight:64,blocks.6.b2.bias:64,"
      "blocks.6.proj.0.weight:64x32x1x1,blocks.6.proj.1.weight:64,blocks.6.proj.1.bias:64,blocks.7.c1.weight:64x64x3x3,"
      "blocks.7.b1.weight:64,blocks.7.b1.bias:64,blocks.7.c2.weight:64x64x3x3,blocks.7.b2.weight:64,"
      "blocks.7.b2.bias:64,blocks.8.c1.weight:64x64x3x3,blocks.8.b1.weight:64,blocks.8.b1.bias:64,"
      "blocks.8.c2.weight:64x64x3x3,blocks.8.b2.weight:64,blocks.8.b2.bias:64,fc.weight:10x64,"
      "fc.bias:10");
  // torch_reference.py: sum(p.numel()) of ResNet(20) = 272186; 3 input channels 272474;
  // ResNet(56) 855482, ResNet(110) 1730426.
  EXPECT_EQ(ParamCount(*net), 272186);
  EXPECT_EQ(ParamCount(**models::CreateNetwork(NetworkSpec{"resnet", {}, 20}, 10, {3, 32, 32})), 272474);
  EXPECT_EQ(ParamCount(**models::CreateNetwork(NetworkSpec{"resnet", {}, 56}, 10)), 855482);
  EXPECT_EQ(ParamCount(**models::CreateNetwork(NetworkSpec{"resnet", {}, 110}, 10)), 1730426);
  // The default depth is 20.
  EXPECT_EQ(ParamCount(**models::CreateNetwork("resnet", 10)), 272186);
}

// The stem follows the data: channels and size; the output is [N, classes].
TEST(ResNetTest, FitsTheInputShape) {
  torch::NoGradGuard no_grad;
  struct Case {
    std::string name;
    std::vector<int64_t> shape;
  };
  for (const Case& c : {Case{"resnet", {1, 28, 28}}, Case{"resnet", {3, 32, 32}}, Case{"resnet18", {1, 28, 28}},
                        Case{"resnet18", {3, 32, 32}}, Case{"resnet18", {3, 96, 96}}, Case{"lenet", {3, 32, 32}},
                        Case{"mlp", {3, 32, 32}}}) {
    absl::StatusOr<std::shared_ptr<models::Network>> net = models::CreateNetwork(NetworkSpec{c.name, {}}, 7, c.shape);
    ASSERT_TRUE(net.ok()) << net.status();
    std::vector<int64_t> in = {2};
    in.insert(in.end(), c.shape.begin(), c.shape.end());
    (*net)->eval();
    EXPECT_EQ((*net)->forward(torch::rand(in)).sizes().vec(), (std::vector<int64_t>{2, 7})) << c.name;
  }
  std::shared_ptr<models::Network> net = *models::CreateNetwork(NetworkSpec{"resnet18", {}}, 10, {3, 32, 32});
  using P = std::pair<std::string, std::vector<int64_t>>;
  std::vector<P> shapes = ParamShapes(*net);
  // CIFAR stem: 3x3 stride 1 (ImageNet's 7x7 stride 2 + pool would leave 8x8 for 32x32).
  EXPECT_EQ(shapes.front(), (P{"conv1.weight", {64, 3, 3, 3}}));
  EXPECT_EQ(shapes.back(), (P{"fc.bias", {10}}));
  EXPECT_EQ(ParamShapes(**models::CreateNetwork(NetworkSpec{"resnet18", {}}, 10, {3, 224, 224})).front(),
            (P{"conv1.weight", {64, 3, 7, 7}}));
  // torchvision's resnet18 has 11,689,512 parameters with 1000 classes and the 7x7 stem.
  EXPECT_EQ(ParamCount(**models::CreateNetwork(NetworkSpec{"resnet18", {}}, 1000, {3, 224, 224})), 11689512);
  EXPECT_THAT(shapes, ::testing::Contains(P{"layer2.0.downsample.0.weight", {128, 64, 1, 1}}));
}

// Buffers are state but not parameters: batch-norm statistics and the input
// normalisation go into checkpoints (after the parameters), the int64 batch counters do
// not; lenet and mlp have none.
TEST(ModelStateTest, CheckpointTensorsAreParametersThenFloatBuffers) {
  std::shared_ptr<models::Network> net = *models::CreateNetwork("resnet", 10);
  std::vector<std::pair<std::string, torch::Tensor>> all = models::CheckpointTensors(*net);
  const size_t params = net->parameters().size();
  ASSERT_GT(all.size(), params);
  for (size_t i = 0; i < params; ++i) EXPECT_EQ(all[i].first, net->named_parameters()[i].key());
  std::vector<std::string> buffers;
  for (size_t i = params; i < all.size(); ++i) buffers.push_back(all[i].first);
  EXPECT_THAT(buffers, ::testing::IsSupersetOf({"input_mean", "input_std", "stem.1.running_mean", "stem.1.running_var",
                                                "blocks.8.b2.running_var"}));
  for (const std::string& b : buffers) EXPECT_THAT(b, ::testing::Not(HasSubstr("num_batches_tracked")));
  // 21 batch norms in ResNet-20 (stem, 2 in each of 9 blocks, 2 projections): mean and var each.
  EXPECT_EQ(buffers.size(), 2u + 2 * 21);
  EXPECT_TRUE(models::HasBatchNorm(*net));
  std::shared_ptr<models::Network> lenet = *models::CreateNetwork("lenet", 10);
  EXPECT_EQ(models::CheckpointTensors(*lenet).size(), lenet->parameters().size());
  EXPECT_FALSE(models::HasBatchNorm(*lenet));
}

// Recalibration makes the running statistics a function of the weights and the images:
// the same whatever the layers saw before, equal to the stem's batch statistics, and
// the network is left in the mode it was in with its momentum.
TEST(ModelStateTest, RecalibrateBatchNormDependsOnWeightsAndImagesOnly) {
  torch::manual_seed(3);
  std::shared_ptr<models::Network> a = *models::CreateNetwork("resnet", 10);
  std::shared_ptr<models::Network> b = *models::CreateNetwork("resnet", 10);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < a->parameters().size(); ++i) b->parameters()[i].copy_(a->parameters()[i]);
    // b's layers have seen other batches (training mode updates the running statistics).
    for (int i = 0; i < 3; ++i) b->forward(torch::rand({4, 1, 28, 28}));
  }
  torch::Tensor images = torch::rand({40, 1, 28, 28});
  models::RecalibrateBatchNorm(*a, images, 20);
  models::RecalibrateBatchNorm(*b, images, 20);
  std::vector<std::pair<std::string, torch::Tensor>> sa = models::CheckpointTensors(*a);
  std::vector<std::pair<std::string, torch::Tensor>> sb = models::CheckpointTensors(*b);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(torch::equal(sa[i].second, sb[i].second)) << sa[i].first;
  EXPECT_TRUE(a->is_training());

  // The stem's BN sees conv(x): its running mean is the mean of the two batch means.
  torch::NoGradGuard no_grad;
  auto stem_conv = a->named_parameters()["stem.0.weight"];
  torch::Tensor y = torch::conv2d(images, stem_conv, {}, 1, 1);
  torch::Tensor want = (y.narrow(0, 0, 20).mean({0, 2, 3}) + y.narrow(0, 20, 20).mean({0, 2, 3})) / 2;
  EXPECT_TRUE(torch::allclose(a->named_buffers()["stem.1.running_mean"], want, 1e-5, 1e-6));
  for (const auto& m : a->modules(false)) {
    if (auto* bn = m->as<torch::nn::BatchNorm2dImpl>()) {
      ASSERT_TRUE(bn->options.momentum().has_value());
      EXPECT_DOUBLE_EQ(*bn->options.momentum(), 0.1);
    }
  }
}

// (x - mean) / std per channel before the stem, with the values saved as buffers.
TEST(ModelStateTest, InputNormalisationIsApplied) {
  torch::NoGradGuard no_grad;
  std::shared_ptr<models::Network> net = *models::CreateNetwork(NetworkSpec{"resnet", {}}, 10, {3, 32, 32});
  net->eval();
  torch::Tensor x = torch::rand({2, 3, 32, 32});
  torch::Tensor mean = torch::tensor({0.5f, 0.25f, 0.125f});
  torch::Tensor std = torch::tensor({2.0f, 4.0f, 0.5f});
  torch::Tensor plain = net->forward((x - mean.view({1, 3, 1, 1})) / std.view({1, 3, 1, 1}));
  net->SetInputNormalization(mean, std);
  EXPECT_TRUE(torch::allclose(net->forward(x), plain, 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(net->named_buffers()["input_std"], std));
}

}  // namespace
}  // namespace dtrain::models
