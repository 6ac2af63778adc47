#include "common/models/mlp.h"

#include "absl/strings/str_cat.h"

namespace dtrain::models {

Mlp::Mlp(int64_t inputs, const std::vector<int64_t>& hidden, int num_classes) {
  int64_t in = inputs;
  for (size_t i = 0; i <= hidden.size(); ++i) {
    const int64_t out = i < hidden.size() ? hidden[i] : num_classes;
    layers_.push_back(register_module(absl::StrCat("fc", i + 1), torch::nn::Linear(in, out)));
    in = out;
  }
}

torch::Tensor Mlp::forward(torch::Tensor x) {
  x = x.flatten(1);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    Gate(*layers_[i]);
    x = torch::relu(layers_[i]->forward(x));
  }
  Gate(*layers_.back());
  return layers_.back()->forward(x);
}

}  // namespace dtrain::models
