// Residual networks (He et al. 2016), built from basic blocks with batch norm.
//
// CifarResNet is the paper's CIFAR network ResNet-(6n+2) exactly as the PyTorch reference
// builds it (tests/bench/torch_reference.py --network resnet): stem conv 3x3 16 + BN +
// relu; three stages of n blocks at 16, 32, 64 channels (the 2nd and 3rd start with
// stride 2); a 1x1 conv + BN projection shortcut wherever the shape changes; global
// average pooling; fc. Parameter names, shapes and order are the reference's
// (stem.0.weight, stem.1.weight, ..., blocks.K.c1.weight, blocks.K.b1.weight, ...,
// blocks.K.proj.0.weight, ..., fc.weight, fc.bias).
//
// ResNet18 is torchvision's resnet18 (names conv1, bn1, layerL.K.conv1, ...,
// layerL.K.downsample.0, fc) with its stem fitted to the input: for images of at most
// 64 pixels a side (Fashion-MNIST, CIFAR) a 3x3 stride-1 conv and no max pooling, as is
// usual for CIFAR, since ImageNet's 7x7 stride-2 conv + pool would shrink 32x32 to 8x8
// before the first block; larger images get ImageNet's stem.
//
// Both normalise their input per channel first (Network::SetInputNormalization; mean 0
// and std 1 until set) and keep batch-norm running statistics as buffers, which are not
// parameters: see RecalibrateBatchNorm (model_state.h) for how they are kept.
#pragma once

#include <string>

#include <torch/torch.h>

#include "common/models/network.h"

namespace dtrain::models {

class CifarResNet : public Network {
 public:
  // `layers` = 6n+2 (checked by ResolveNetworkSpec).
  CifarResNet(int layers, int64_t in_channels, int num_classes);
  torch::Tensor forward(torch::Tensor x) override;
  const std::string& name() const override { return name_; }
  void SetInputNormalization(const torch::Tensor& mean, const torch::Tensor& std) override;

 private:
  const std::string name_ = "resnet";
  torch::Tensor mean_, std_;
  torch::nn::Sequential stem_{nullptr}, blocks_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

class ResNet18 : public Network {
 public:
  ResNet18(int64_t in_channels, int64_t height, int64_t width, int num_classes);
  torch::Tensor forward(torch::Tensor x) override;
  const std::string& name() const override { return name_; }
  void SetInputNormalization(const torch::Tensor& mean, const torch::Tensor& std) override;

 private:
  const std::string name_ = "resnet18";
  bool imagenet_stem_ = false;
  torch::Tensor mean_, std_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::Sequential layers_[4] = {torch::nn::Sequential(nullptr), torch::nn::Sequential(nullptr),
                                      torch::nn::Sequential(nullptr), torch::nn::Sequential(nullptr)};
  torch::nn::Linear fc_{nullptr};
};

}  // namespace dtrain::models
