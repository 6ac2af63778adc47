#include "common/kv/merge_rule.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dtrain::kv {

absl::StatusOr<PushAction> SyncMergeRule::OnPush(const KeyProgress& key, int worker_rank, int64_t step) const {
  if (step < key.version) return PushAction::kIgnore;  // that step is merged: a retry
  if (step > key.version) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker_rank, " pushed key ", key.key, " for step ",
                                                      step, " but the key is at version ", key.version,
                                                      " (pull before pushing the next step)"));
  }
  if (key.worker_pending) return PushAction::kIgnore;  // a retry
  return key.pending_count + 1 == num_workers_ ? PushAction::kMergeStep : PushAction::kStorePending;
}

bool SyncMergeRule::CanAnswerPull(const KeyProgress& key, int64_t min_version) const {
  return key.version >= min_version;
}

absl::StatusOr<PushAction> SspMergeRule::OnPush(const KeyProgress& key, int worker_rank, int64_t step) const {
  if (step <= key.version) return sync_.OnPush(key, worker_rank, step);
  if (step > key.version + staleness_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker_rank, " pushed key ", key.key, " for step ", step, " but the key is at version ", key.version,
        ": more than --staleness ", staleness_, " steps ahead (pull before pushing further)"));
  }
  return key.worker_ahead ? PushAction::kIgnore : PushAction::kStoreAhead;
}

bool SspMergeRule::CanAnswerPull(const KeyProgress& key, int64_t min_version) const {
  return key.version >= min_version;
}

absl::StatusOr<PushAction> AsyncMergeRule::OnPush(const KeyProgress& key, int /*worker_rank*/, int64_t step) const {
  if (step <= key.worker_last_push) return PushAction::kIgnore;  // a retry
  return PushAction::kApplyNow;
}

bool AsyncMergeRule::CanAnswerPull(const KeyProgress& /*key*/, int64_t /*min_version*/) const { return true; }

std::unique_ptr<MergeRule> CreateMergeRule(const StoreConfig& config) {
  switch (config.mode) {
    case MergeMode::kAsync: return std::make_unique<AsyncMergeRule>();
    case MergeMode::kSsp: return std::make_unique<SspMergeRule>(config.num_workers, config.staleness);
    case MergeMode::kSync: break;
  }
  return std::make_unique<SyncMergeRule>(config.num_workers);
}

}  // namespace dtrain::kv
