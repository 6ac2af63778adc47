#include "common/models/resnet.h"

#include "absl/strings/str_cat.h"

namespace dtrain::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

// A basic block: conv 3x3 + BN + relu, conv 3x3 + BN, plus the input (through a 1x1
// conv + BN projection when stride or width change), relu. `names` are the reference's
// ("c1", "b1", "c2", "b2", "proj") or torchvision's ("conv1", "bn1", "conv2", "bn2",
// "downsample"), registered in that order, which is the order of the parameters.
struct BlockNames {
  const char* c1;
  const char* b1;
  const char* c2;
  const char* b2;
  const char* shortcut;
};
constexpr BlockNames kReferenceNames = {"c1", "b1", "c2", "b2", "proj"};
constexpr BlockNames kTorchvisionNames = {"conv1", "bn1", "conv2", "bn2", "downsample"};

class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride, const BlockNames& names)
      : c1_(register_module(names.c1, Conv(in, out, 3, stride, 1))),
        b1_(register_module(names.b1, nn::BatchNorm2d(out))),
        c2_(register_module(names.c2, Conv(out, out, 3, 1, 1))),
        b2_(register_module(names.b2, nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      shortcut_ = register_module(names.shortcut, nn::Sequential(Conv(in, out, 1, stride, 0), nn::BatchNorm2d(out)));
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor y = b2_->forward(c2_->forward(torch::relu(b1_->forward(c1_->forward(x)))));
    return torch::relu(y + (shortcut_.is_empty() ? x : shortcut_->forward(x)));
  }

 private:
  nn::Conv2d c1_;
  nn::BatchNorm2d b1_;
  nn::Conv2d c2_;
  nn::BatchNorm2d b2_;
  nn::Sequential shortcut_{nullptr};
};
TORCH_MODULE(BasicBlock);

// (x - mean) / std per channel: buffers of [C], broadcast over N, H, W.
torch::Tensor Normalize(const torch::Tensor& x, const torch::Tensor& mean, const torch::Tensor& std) {
  return (x - mean.view({1, -1, 1, 1})) / std.view({1, -1, 1, 1});
}

void SetStats(torch::Tensor& mean, torch::Tensor& std, const torch::Tensor& new_mean, const torch::Tensor& new_std) {
  TORCH_CHECK(new_mean.sizes() == mean.sizes() && new_std.sizes() == std.sizes(), "input normalisation for ",
              mean.numel(), " channels, got mean ", new_mean.sizes(), " and std ", new_std.sizes());
  torch::NoGradGuard no_grad;
  mean.copy_(new_mean);
  std.copy_(new_std);
}

}  // namespace

CifarResNet::CifarResNet(int layers, int64_t in_channels, int num_classes) {
  const int n = (layers - 2) / 6;
  mean_ = register_buffer("input_mean", torch::zeros({in_channels}));
  std_ = register_buffer("input_std", torch::ones({in_channels}));
  stem_ = register_module("stem", nn::Sequential(Conv(in_channels, 16, 3, 1, 1), nn::BatchNorm2d(16), nn::ReLU()));
  nn::Sequential blocks;
  int64_t in = 16;
  for (const auto& [out, stride] : {std::pair<int64_t, int64_t>{16, 1}, {32, 2}, {64, 2}}) {
    for (int i = 0; i < n; ++i) {
      blocks->push_back(BasicBlock(in, out, i == 0 ? stride : 1, kReferenceNames));
      in = out;
    }
  }
  blocks_ = register_module("blocks", blocks);
  fc_ = register_module("fc", nn::Linear(64, num_classes));
}

torch::Tensor CifarResNet::forward(torch::Tensor x) {
  Gate(*stem_);
  x = stem_->forward(Normalize(x, mean_, std_));
  x = ForwardGated(*blocks_, x);
  Gate(*fc_);
  return fc_->forward(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
}

void CifarResNet::SetInputNormalization(const torch::Tensor& mean, const torch::Tensor& std) {
  SetStats(mean_, std_, mean, std);
}

ResNet18::ResNet18(int64_t in_channels, int64_t height, int64_t width, int num_classes)
    : imagenet_stem_(std::min(height, width) > 64) {
  mean_ = register_buffer("input_mean", torch::zeros({in_channels}));
  std_ = register_buffer("input_std", torch::ones({in_channels}));
  conv1_ = register_module("conv1", imagenet_stem_ ? Conv(in_channels, 64, 7, 2, 3) : Conv(in_channels, 64, 3, 1, 1));
  bn1_ = register_module("bn1", nn::BatchNorm2d(64));
  int64_t in = 64;
  for (int l = 0; l < 4; ++l) {
    const int64_t out = int64_t{64} << l;
    const int64_t stride = l == 0 ? 1 : 2;
    nn::Sequential layer(BasicBlock(in, out, stride, kTorchvisionNames), BasicBlock(out, out, 1, kTorchvisionNames));
    layers_[l] = register_module(absl::StrCat("layer", l + 1), layer);
    in = out;
  }
  fc_ = register_module("fc", nn::Linear(512, num_classes));
}

torch::Tensor ResNet18::forward(torch::Tensor x) {
  Gate(*conv1_);
  Gate(*bn1_);
  x = torch::relu(bn1_->forward(conv1_->forward(Normalize(x, mean_, std_))));
  if (imagenet_stem_) x = torch::max_pool2d(x, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
  for (auto& layer : layers_) x = ForwardGated(*layer, x);
  Gate(*fc_);
  return fc_->forward(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
}

void ResNet18::SetInputNormalization(const torch::Tensor& mean, const torch::Tensor& std) {
  SetStats(mean_, std_, mean, std);
}

}  // namespace dtrain::models
