// MXNet's lenet (example/image-classification/symbols/lenet.py).
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "common/models/network.h"

namespace dtrain::models {

// After LeNet's two conv 5x5 + pool 2 stages: 28 -> 24 -> 12 -> 8 -> 4.
int64_t LeNetSide(int64_t side);

// MXNet's get_lenet(): LeCun et al. 1998 with tanh activations and max pooling.
// 28x28 -> conv 5x5 -> 24x24 -> pool -> 12x12 -> conv 5x5 -> 8x8 -> pool -> 4x4; other
// sizes change only fc1's inputs, other channel counts conv1's.
class LeNet : public Network {
 public:
  LeNet(int64_t channels, int64_t height, int64_t width, int num_classes);
  torch::Tensor forward(torch::Tensor x) override;
  const std::string& name() const override { return name_; }

 private:
  const std::string name_ = "lenet";
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

}  // namespace dtrain::models
