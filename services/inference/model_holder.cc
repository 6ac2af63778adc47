#include "services/inference/model_holder.h"

#include <atomic>
#include <utility>

namespace dtrain::inference {

std::shared_ptr<const LoadedModel> ModelHolder::Get() const { return std::atomic_load(&model_); }

void ModelHolder::Set(std::shared_ptr<const LoadedModel> model) {
  std::atomic_store(&model_, std::move(model));
  absl::MutexLock lock(&error_mu_);
  reload_error_.clear();
}

void ModelHolder::SetReloadError(std::string error) {
  absl::MutexLock lock(&error_mu_);
  reload_error_ = std::move(error);
}

std::string ModelHolder::reload_error() const {
  absl::MutexLock lock(&error_mu_);
  return reload_error_;
}

}  // namespace dtrain::inference
