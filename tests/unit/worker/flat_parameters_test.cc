// Flatten: the parameters become views of two flat tensors, keep their values, and
// backward keeps accumulating into the flat gradients (what one-copy steps rely on).
#include "services/worker/flat_parameters.h"

#include <gtest/gtest.h>

namespace dtrain::worker {
namespace {

TEST(FlattenTest, ParametersBecomeAlignedViewsAndKeepTheirValues) {
  torch::manual_seed(1);
  torch::nn::Linear net(3, 5);  // weight 15 values, bias 5
  const std::vector<torch::Tensor> params = net->parameters();
  const torch::Tensor w = params[0].detach().clone(), b = params[1].detach().clone();
  absl::StatusOr<FlatParameters> flat = Flatten(params, torch::TensorOptions());
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_EQ(flat->values.numel(), 2 * kFlatAlignment);  // each padded to the alignment
  EXPECT_TRUE(torch::equal(net->weight, w));
  EXPECT_TRUE(torch::equal(net->bias, b));
  const float* base = flat->values.data_ptr<float>();
  EXPECT_EQ(net->weight.data_ptr<float>(), base);
  EXPECT_EQ(net->bias.data_ptr<float>(), base + kFlatAlignment);
  EXPECT_EQ(net->bias.grad().data_ptr<float>(), flat->grads.data_ptr<float>() + kFlatAlignment);
  // A write through the flat tensor is the parameter's.
  flat->values.narrow(0, kFlatAlignment, 5).fill_(7);
  EXPECT_TRUE(torch::equal(net->bias.detach(), torch::full({5}, 7.0f)));
}

TEST(FlattenTest, BackwardAccumulatesIntoTheFlatGradients) {
  torch::manual_seed(2);
  torch::nn::Linear net(4, 2);
  absl::StatusOr<FlatParameters> flat = Flatten(net->parameters(), torch::TensorOptions());
  ASSERT_TRUE(flat.ok()) << flat.status();
  const torch::Tensor x = torch::randn({8, 4});
  net->forward(x).sum().backward();
  // The gradient of sum(xW^T + b) by b is the batch size, by W the column sums of x.
  EXPECT_TRUE(torch::equal(flat->grads.narrow(0, kFlatAlignment, 2), torch::full({2}, 8.0f)));
  EXPECT_TRUE(torch::allclose(flat->grads.narrow(0, 0, 8).view({2, 4}), x.sum(0).expand({2, 4})));
  EXPECT_EQ(net->weight.grad().data_ptr<float>(), flat->grads.data_ptr<float>());
  flat->grads.zero_();
  net->forward(x).sum().backward();
  EXPECT_TRUE(torch::equal(net->bias.grad(), torch::full({2}, 8.0f)));  // zeroed, not accumulated twice
}

TEST(FlattenTest, AnotherDtypeIsRefusedNamingTheParameter) {
  torch::nn::Linear net(2, 2);
  net->to(torch::kFloat64);
  absl::StatusOr<FlatParameters> flat = Flatten(net->parameters(), torch::TensorOptions());
  ASSERT_FALSE(flat.ok());
  EXPECT_EQ(flat.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(flat.status().message().find("parameter 0 is Double, not float32"), std::string::npos) << flat.status();
}

}  // namespace
}  // namespace dtrain::worker
