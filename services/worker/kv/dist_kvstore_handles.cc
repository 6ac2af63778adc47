// What DistKVStore hands its caller for a step: the EarlyStep BeginStep opens (each
// gradient offered from backward goes out at once) and the StepHandle its Send returns
// (the step's weights awaited parameter by parameter, or all at once). Both are views
// of the store's one pending step (dist_kvstore_step.cc), which the store ends itself
// only in Rollback.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "services/worker/kv/dist_kvstore.h"

namespace dtrain::worker {

class DistKVStore::StepHandle final : public PendingStep {
 public:
  StepHandle(DistKVStore& store, uint64_t id) : store_(store), id_(id) {}
  // Whatever stopped the caller, no answer may land in the weights after this.
  ~StepHandle() override { Wait(absl::InfiniteFuture()).IgnoreError(); }

  absl::Status WaitParam(size_t param_index, absl::Time deadline) override {
    if (status_) return *status_;
    return store_.AwaitPendingParam(id_, param_index, deadline);
  }
  absl::Status Wait(absl::Time deadline) override {
    if (!status_) status_ = store_.FinishPending(id_, deadline);
    return *status_;
  }
  bool done() const override { return status_.has_value(); }

 private:
  DistKVStore& store_;
  const uint64_t id_;
  std::optional<absl::Status> status_;  // once Wait returned
};

class DistKVStore::EarlyStep final : public OpenStep {
 public:
  EarlyStep(DistKVStore& store, int64_t step)
      : store_(store), step_(step), offered_(store.slices_of_param_.size(), false) {}
  ~EarlyStep() override {
    // Dropped before Send (backward or its checks failed): what went out early is
    // collected, so that none of its answers lands in the weights afterwards.
    if (!sent_ && std::find(offered_.begin(), offered_.end(), true) != offered_.end()) {
      store_.WaitAllServers(store_.now_()).IgnoreError();
    }
  }

  bool pushes_early() const override { return true; }
  absl::Status Offer(size_t param_index, const float* grad) override {
    if (sent_) return absl::FailedPreconditionError(absl::StrCat("Offer after step ", step_, " was sent"));
    return store_.OfferEarly(step_, param_index, grad, &offered_);
  }
  absl::StatusOr<std::unique_ptr<PendingStep>> Send(const std::vector<const float*>& grads) override {
    if (sent_) return absl::FailedPreconditionError(absl::StrCat("step ", step_, " sent twice"));
    sent_ = true;
    DTRAIN_RETURN_IF_ERROR(store_.SendStep(step_, offered_, grads));
    return std::unique_ptr<PendingStep>(std::make_unique<StepHandle>(store_, store_.pending_id_));
  }

 private:
  DistKVStore& store_;
  const int64_t step_;
  std::vector<bool> offered_;  // per parameter: sent by Offer
  bool sent_ = false;
};

std::unique_ptr<OpenStep> DistKVStore::BeginStep(int64_t step) { return std::make_unique<EarlyStep>(*this, step); }

absl::Status DistKVStore::PushPull(int64_t step, const std::vector<const float*>& grads) {
  DTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PendingStep> pending, StartStep(step, grads));
  return pending->Wait(absl::InfiniteFuture());
}

}  // namespace dtrain::worker
