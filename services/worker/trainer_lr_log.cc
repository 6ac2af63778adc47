#include "services/worker/trainer_lr_log.h"

#include <algorithm>

#include <utility>

#include "absl/strings/str_format.h"

namespace dtrain::worker {

LrChangeLog::LrChangeLog(const kv::OptimizerOptions& options, int64_t updates_per_step)
    : updates_per_step_(updates_per_step) {
  if (options.lr_steps.empty() || options.lr_factor == 1.0) return;  // a constant rate: nothing to say
  absl::StatusOr<std::unique_ptr<kv::Optimizer>> o = kv::CreateOptimizer(options);
  if (o.ok()) optimizer_ = *std::move(o);
}

std::string LrChangeLog::LineForStep(int64_t step) const {
  if (optimizer_ == nullptr || step <= 0) return "";
  const int64_t count = step * updates_per_step_;
  const int64_t previous = (step - 1) * updates_per_step_;
  const double lr = optimizer_->LearningRate(count);
  if (lr == optimizer_->LearningRate(previous)) return "";
  return absl::StrFormat("Update[%d]: Change learning rate to %0.5e", count + 1, lr);
}

std::string LrChangeLog::LineForEpoch(const kv::OptimizerOptions& options, const std::vector<int64_t>& epochs,
                                      int64_t epoch, int64_t first_step) {
  if (std::find(epochs.begin(), epochs.end(), epoch) == epochs.end()) return "";
  double lr = options.learning_rate;
  for (int64_t e : epochs) {
    if (e <= epoch) lr *= options.lr_factor;
  }
  return absl::StrFormat("Update[%d]: Change learning rate to %0.5e", first_step + 1, lr);
}

}  // namespace dtrain::worker
