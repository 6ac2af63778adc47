// MXNet's mlp (example/image-classification/symbols/mlp.py): flatten -> fully connected
// layers with relu -> fc classes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/models/network.h"

namespace dtrain::models {

// MXNet's get_mlp(): fully connected layers with relu, then the output layer; the
// hidden widths are MXNet's 128,64 unless the spec says otherwise (torch_reference.py's
// --hidden). Layers are built, and so initialised, input side first: fc1, fc2, ...
class Mlp : public Network {
 public:
  Mlp(int64_t inputs, const std::vector<int64_t>& hidden, int num_classes);
  torch::Tensor forward(torch::Tensor x) override;

  const std::string& name() const override { return name_; }

 private:
  const std::string name_ = "mlp";
  std::vector<torch::nn::Linear> layers_;
};

}  // namespace dtrain::models
