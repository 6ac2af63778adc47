// The networks, shaped as MXNet's example/image-classification symbols and as the
// PyTorch reference (tests/bench/torch_reference.py) builds them.
//   mlp:      flatten -> fc 128 relu -> fc 64 relu -> fc classes (MXNet's widths; any others
//             through NetworkSpec::hidden, e.g. 2048,2048: layers fc1 .. fcN+1)
//   lenet:    conv 20 5x5 tanh -> maxpool 2 -> conv 50 5x5 tanh -> maxpool 2 -> flatten
//             -> fc 500 tanh -> fc classes
//   resnet:   CIFAR-style ResNet-(6n+2) of He et al. 2016 (resnet.h): 3 stages of n basic
//             blocks, 16/32/64 channels, batch norm, 1x1 projection shortcuts
//   resnet18: ResNet-18 (torchvision's names), its stem fitted to the input size
// Input: float32 [N, C, H, W] in [0, 1], the shape the network was built for (the data's:
// 1x28x28 for Fashion-MNIST, 3x32x32 for CIFAR-10). Output: logits [N, classes].
// Only C++-frontend APIs present in both LibTorch 1.13 and 2.x are used.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "common/models/network.h"
#include "common/models/network_spec.h"

namespace dtrain::models {

// The input shape of the data sets we train on by default: Fashion-MNIST's 1x28x28.
std::vector<int64_t> DefaultInputShape();

// INVALID_ARGUMENT for an unknown name (listing the known ones), a spec the network does
// not take or that is out of range (ResolveNetworkSpec), or an input shape that is not
// [C, H, W] with C in [1, 64] and H, W in [1, 4096], or too small for the network
// (lenet needs 16x16).
absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const NetworkSpec& spec, int num_classes = 10,
                                                       const std::vector<int64_t>& input_shape = DefaultInputShape());
// The network with its default shape (the mlp: MXNet's 128,64; the resnet: 20 layers).
absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const std::string& name, int num_classes = 10);

}  // namespace dtrain::models
