// The networks, shaped as MXNet's example/image-classification symbols.
//   mlp:   flatten -> fc 128 relu -> fc 64 relu -> fc classes (MXNet's widths; any others
//          through NetworkSpec::hidden, e.g. 2048,2048: layers fc1 .. fcN+1)
//   lenet: conv 20 5x5 tanh -> maxpool 2 -> conv 50 5x5 tanh -> maxpool 2 -> flatten
//          -> fc 500 tanh -> fc classes
// Input: float32 [N, 1, 28, 28] in [0, 1]. Output: logits [N, classes].
// Only C++-frontend APIs present in both LibTorch 1.13 and 2.x are used.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "common/models/network_spec.h"

namespace dtrain::models {

class Network : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  virtual const std::string& name() const = 0;
};

// INVALID_ARGUMENT for an unknown name (listing the known ones), hidden widths the
// network does not take or that are out of range (ResolveNetworkSpec).
absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const NetworkSpec& spec, int num_classes = 10);
// The network with its default shape (the mlp: MXNet's 128,64).
absl::StatusOr<std::shared_ptr<Network>> CreateNetwork(const std::string& name, int num_classes = 10);

}  // namespace dtrain::models
