#include "common/kv/rank_set_merge_rule.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dtrain::kv {

absl::StatusOr<PushAction> RankSetMergeRule::OnPush(const KeyProgress& key, int worker_rank, int64_t step) const {
  if (!ranks_->Holds(step, worker_rank)) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker_rank, " pushed key ", key.key, " for step ",
                                                      step, " but is not in ", ranks_->DescribeAt(step)));
  }
  // Then exactly SyncMergeRule's decision, with this step's rank count.
  return SyncMergeRule(ranks_->CountAt(step)).OnPush(key, worker_rank, step);
}

bool RankSetMergeRule::CanAnswerPull(const KeyProgress& key, int64_t min_version) const {
  return key.version >= min_version;
}

}  // namespace dtrain::kv
