#include "services/worker/early_pushes.h"

#include "common/kv/finite_check.h"

namespace dtrain::worker {

EarlyPushes::EarlyPushes(std::vector<torch::Tensor>& params) : params_(params) {}

EarlyPushes::~EarlyPushes() {
  for (size_t i = 0; i < hooks_.size(); ++i) params_[i].remove_hook(hooks_[i]);
}

void EarlyPushes::Begin(OpenStep& step) {
  for (torch::Tensor& t : held_) t = torch::Tensor();
  status_ = absl::OkStatus();
  step_ = &step;
  if (!hooks_.empty() || !step.pushes_early()) return;
  held_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    // Runs on the thread that called backward (CPU autograd), between two nodes.
    hooks_.push_back(params_[i].register_hook([this, i](const torch::Tensor& grad) {
      if (!status_.ok() || step_ == nullptr) return;
      torch::Tensor g = grad.contiguous();
      if (g.scalar_type() != torch::kFloat32 || !kv::AllFinite(g.data_ptr<float>(), g.numel())) return;
      held_[i] = g;
      status_ = step_->Offer(i, g.data_ptr<float>());
    }));
  }
}

absl::Status EarlyPushes::End() {
  step_ = nullptr;
  return status_;
}

}  // namespace dtrain::worker
