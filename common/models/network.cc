#include "common/models/network.h"

namespace dtrain::models {

torch::Tensor Network::ForwardGated(torch::nn::SequentialImpl& seq, torch::Tensor x) const {
  if (!gate_) return seq.forward(x);
  for (auto& module : seq) {
    gate_(*module.ptr());
    x = module.forward(x);
  }
  return x;
}

}  // namespace dtrain::models
