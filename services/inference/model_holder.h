// The model now serving, swapped whole on reload.
//
// Readers take a std::shared_ptr copy (an atomic load) and keep using that model for the
// whole request, so a reload never changes weights under a running forward and the old
// model is freed when its last request finishes. No lock is held while a model runs.
#pragma once

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "services/inference/loaded_model.h"

namespace dtrain::inference {

class ModelHolder {
 public:
  // The serving model, or null before the first load. The copy is the only shared
  // step (libstdc++ guards it with a striped spin lock for a few instructions).
  std::shared_ptr<const LoadedModel> Get() const;
  // Makes `model` the one new requests use and clears the reload error.
  void Set(std::shared_ptr<const LoadedModel> model);

  // Why the newest checkpoint on disk is not serving ("" when it is). For ModelInfo,
  // so an operator sees a refused reload without reading logs.
  void SetReloadError(std::string error);
  std::string reload_error() const;

 private:
  // Only ever accessed through std::atomic_load / std::atomic_store (C++17's atomic
  // shared_ptr operations).
  std::shared_ptr<const LoadedModel> model_;
  mutable absl::Mutex error_mu_;
  std::string reload_error_ ABSL_GUARDED_BY(error_mu_);
};

}  // namespace dtrain::inference
