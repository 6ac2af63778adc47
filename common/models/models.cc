#include "common/models/models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/models/resnet.h"
#include "common/status_macros.h"

namespace dtrain::models {
namespace {

// Well above any data set we serve; stops a typo (a pixel count, say) from building a
// multi-gigabyte output layer.
constexpr int kMaxClasses = 100000;
constexpr int64_t kMaxChannels = 64;
constexpr int64_t kMaxSide = 4096;

// MXNet's get_mlp(): fully connected layers with relu, then the output layer; the
// hidden widths are MXNet's 128,64 unless the spec says otherwise (torch_reference.py's
// --hidden). Layers are built, and so initialised, input side first: fc1, fc2, ...
class Mlp : public Network {
 public:
  Mlp(int64_t inputs, const std::vector<int64_t>& hidden, int num_classes) {
    int64_t in = inputs;
    for (size_t i = 0; i <= hidden.size(); ++i) {
      const int64_t out = i < hidden.size() ? hidden[i] : num_classes;
      layers_.push_back(register_module(absl::StrCat("fc", i + 1), torch::nn::Linear(in, out)));
      in = out;
    }
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    for (size_t i = 0; i + 1 < layers_.size(); ++i) {
      Gate(*layers_[i]);
      x = torch::relu(layers_[i]->forward(x));
    }
    Gate(*layers_.back());
    return layers_.back()->forward(x);
  }

  const std::string& name() const override { return name_; }

 private:
  const std::string name_ = "mlp";
  std::vector<torch::nn::Linear> layers_;
};

// After LeNet's two conv 5x5 + pool 2 stages: 28 -> 24 -> 12 -> 8 -> 4.
int64_t LeNetSide(int64_t side) { return ((side - 4) / 2 - 4) / 2; }

// MXNet's get_lenet(): LeCun et al. 1998 with tanh activations and max pooling.
// 28x28 -> conv 5x5 -> 24x24 -> pool -> 12x12 -> conv 5x5 -> 8x8 -> pool -> 4x4; other
// sizes change only fc1's inputs, other channel counts conv1's.
class LeNet : public Network {
 public:
  LeNet(int64_t channels, int64_t height, int64_t width, int num_classes)
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, 20, 5)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(20, 50, 5)))),
        fc1_(register_module("fc1", torch::nn::Linear(50 * LeNetSide(height) * LeNetSide(width), 500))),
        fc2_(register_module("fc2", torch::nn::Linear(500, num_classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    // Computed as tanh(pool(conv)) on channels-last activations, which is MXNet's
    // pool(tanh(conv)) value for value: tanh is increasing, so the window's largest input
    // gives its largest output. tanh then runs on a quarter of the values, and LibTorch's
    // max_pool2d is vectorised only for channels-last (its NCHW loop took 18% of a step);
    // conv2 keeps the layout its input has. The weights stay contiguous (NCHW), as the
    // parameter servers and checkpoints hold them. A step takes a third less CPU.
    Gate(*conv1_);
    x = torch::tanh(torch::max_pool2d(conv1_->forward(x).contiguous(at::MemoryFormat::ChannelsLast),
                                      /*kernel_size=*/2, /*stride=*/2));
    Gate(*conv2_);
    x = torch::tanh(torch::max_pool2d(conv2_->forward(x).contiguous(at::MemoryFormat::ChannelsLast),
                                      /*kernel_size=*/2, /*stride=*/2));
    Gate(*fc1_);
    x = torch::tanh(fc1_->forward(x.flatten(1)));
    Gate(*fc2_);
    return fc2_->forward(x);
  }

  const std::string& name() const override { return name_; }

 private:
  const std::string name_ = "lenet";
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

absl::Status CheckInputShape(const std::string& network, const std::vector<int64_t>& shape) {
  const bool ok = shape.size() == 3 && shape[0] >= 1 && shape[0] <= kMaxChannels && shape[1] >= 1 &&
                  shape[1] <= kMaxSide && shape[2] >= 1 && shape[2] <= kMaxSide;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("network ", network, ": input shape [",
                                                   absl::StrJoin(shape, ","), "] is not [C,H,W] with C in [1, ",
                                                   kMaxChannels, "] and H, W in [1, ", kMaxSide, "]"));
  }
  if (network == "lenet" && (LeNetSide(shape[1]) < 1 || LeNetSide(shape[2]) < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("network lenet: its two 5x5 convolutions and 2x2 poolings need "
                                                   "images of at least 16x16, not ",
                                                   shape[1], "x", shape[2]));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> DefaultInputShape() { return {1, 28, 28}; }

torch::Tensor Network::ForwardGated(torch::nn::SequentialImpl& seq, torch::Tensor x) const {
  if (!gate_) return seq.forward(x);
  for (auto& module : seq) {
    gate_(*module.ptr());
    x = module.forward(x);
  }
  return x;
}

absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const NetworkSpec& spec, int num_classes,
                                                       const std::vector<int64_t>& input_shape) {
  if (num_classes < 1 || num_classes > kMaxClasses) {
    return absl::InvalidArgumentError(absl::StrCat("network ", spec.name, ": num_classes ", num_classes,
                                                   " is not in [1, ", kMaxClasses, "]"));
  }
  DTRAIN_RETURN_IF_ERROR(CheckInputShape(spec.name, input_shape));
  const int64_t channels = input_shape[0], height = input_shape[1], width = input_shape[2];
  DTRAIN_ASSIGN_OR_RETURN(
      const NetworkSpec resolved,
      ResolveNetworkSpec(spec.name, spec.hidden, channels * height * width, num_classes, spec.num_layers));
  if (resolved.name == "mlp") {
    return std::shared_ptr<Network>(std::make_shared<Mlp>(channels * height * width, resolved.hidden, num_classes));
  }
  if (resolved.name == "resnet") {
    return std::shared_ptr<Network>(std::make_shared<CifarResNet>(resolved.num_layers, channels, num_classes));
  }
  if (resolved.name == "resnet18") {
    return std::shared_ptr<Network>(std::make_shared<ResNet18>(channels, height, width, num_classes));
  }
  return std::shared_ptr<Network>(std::make_shared<LeNet>(channels, height, width, num_classes));
}

absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const std::string& name, int num_classes) {
  return CreateNetwork(NetworkSpec{name, {}}, num_classes);
}

}  // namespace dtrain::models
