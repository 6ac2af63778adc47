// KVStore's defaults for a store whose steps are synchronous: nothing pushed early, and
// a step's handle done by the time Send returns.
#include "services/worker/kv/kvstore.h"

#include <utility>

namespace dtrain::worker {
namespace {

class DoneStep final : public PendingStep {
 public:
  explicit DoneStep(absl::Status status) : status_(std::move(status)) {}
  absl::Status WaitParam(size_t /*param_index*/, absl::Time /*deadline*/) override { return status_; }
  absl::Status Wait(absl::Time /*deadline*/) override { return status_; }
  bool done() const override { return true; }

 private:
  const absl::Status status_;
};

// Offer ignores the gradients; Send runs the whole step with PushPull.
class SynchronousStep final : public OpenStep {
 public:
  SynchronousStep(KVStore& store, int64_t step) : store_(store), step_(step) {}
  bool pushes_early() const override { return false; }
  absl::Status Offer(size_t /*param_index*/, const float* /*grad*/) override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<PendingStep>> Send(const std::vector<const float*>& grads) override {
    return FinishedStep(store_.PushPull(step_, grads));
  }

 private:
  KVStore& store_;
  const int64_t step_;
};

}  // namespace

std::unique_ptr<PendingStep> FinishedStep(absl::Status status) { return std::make_unique<DoneStep>(std::move(status)); }

std::unique_ptr<OpenStep> KVStore::BeginStep(int64_t step) { return std::make_unique<SynchronousStep>(*this, step); }

absl::StatusOr<std::unique_ptr<PendingStep>> KVStore::StartStep(int64_t step, const std::vector<const float*>& grads) {
  return BeginStep(step)->Send(grads);
}

}  // namespace dtrain::worker
