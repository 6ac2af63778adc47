#include "services/worker/early_pushes.h"

#include "common/kv/finite_check.h"

namespace dtrain::worker {

EarlyPushes::EarlyPushes(std::vector<torch::Tensor>& params, KVStore& kv) : params_(params), kv_(kv) {
  if (!kv_.PushesEarly()) return;
  held_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    // Runs on the thread that called backward (CPU autograd), between two nodes.
    hooks_.push_back(params_[i].register_hook([this, i](const torch::Tensor& grad) {
      if (!status_.ok() || step_ < 0) return;
      torch::Tensor g = grad.contiguous();
      if (g.scalar_type() != torch::kFloat32 || !kv::AllFinite(g.data_ptr<float>(), g.numel())) return;
      held_[i] = g;
      status_ = kv_.PushEarly(step_, i, g.data_ptr<float>());
    }));
  }
}

EarlyPushes::~EarlyPushes() {
  for (size_t i = 0; i < hooks_.size(); ++i) params_[i].remove_hook(hooks_[i]);
}

void EarlyPushes::StartStep(int64_t step) {
  step_ = step;
  for (torch::Tensor& t : held_) t = torch::Tensor();
  status_ = absl::OkStatus();
}

}  // namespace dtrain::worker
