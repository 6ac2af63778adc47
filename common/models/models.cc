#include "common/models/models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain::models {
namespace {

// Well above any data set we serve; stops a typo (a pixel count, say) from building a
// multi-gigabyte output layer.
constexpr int kMaxClasses = 100000;
constexpr int64_t kPixels = 28 * 28;

// MXNet's get_mlp(): three fully connected layers.
class Mlp : public Network {
 public:
  explicit Mlp(int num_classes)
      : fc1_(register_module("fc1", torch::nn::Linear(kPixels, 128))),
        fc2_(register_module("fc2", torch::nn::Linear(128, 64))),
        fc3_(register_module("fc3", torch::nn::Linear(64, num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    x = torch::relu(fc1_->forward(x));
    x = torch::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

  const std::string& name() const override { return name_; }

 private:
  const std::string name_ = "mlp";
  torch::nn::Linear fc1_, fc2_, fc3_;
};

// MXNet's get_lenet(): LeCun et al. 1998 with tanh activations and max pooling.
// 28x28 -> conv 5x5 -> 24x24 -> pool -> 12x12 -> conv 5x5 -> 8x8 -> pool -> 4x4.
class LeNet : public Network {
 public:
  explicit LeNet(int num_classes)
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 20, 5)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(20, 50, 5)))),
        fc1_(register_module("fc1", torch::nn::Linear(50 * 4 * 4, 500))),
        fc2_(register_module("fc2", torch::nn::Linear(500, num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::tanh(conv1_->forward(x)), /*kernel_size=*/2, /*stride=*/2);
    x = torch::max_pool2d(torch::tanh(conv2_->forward(x)), /*kernel_size=*/2, /*stride=*/2);
    x = torch::tanh(fc1_->forward(x.flatten(1)));
    return fc2_->forward(x);
  }

  const std::string& name() const override { return name_; }

 private:
  const std::string name_ = "lenet";
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

}  // namespace

std::vector<std::string> KnownNetworks() { return {"mlp", "lenet"}; }

absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const std::string& name, int num_classes) {
  if (num_classes < 1 || num_classes > kMaxClasses) {
    return absl::InvalidArgumentError(absl::StrCat("network ", name, ": num_classes ", num_classes,
                                                   " is not in [1, ", kMaxClasses, "]"));
  }
  if (name == "mlp") return std::shared_ptr<Network>(std::make_shared<Mlp>(num_classes));
  if (name == "lenet") return std::shared_ptr<Network>(std::make_shared<LeNet>(num_classes));
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown network \"", name, "\" (known: ", absl::StrJoin(KnownNetworks(), ", "), ")"));
}

}  // namespace dtrain::models
