// The sync merge of an elastic job: for each key and step, exactly one push from every
// rank of the step's generation (StepRanks) is merged, and a push from a rank outside
// it is refused. With one generation {0 .. n-1} it decides as SyncMergeRule(n),
// and MeanOverRanks (rank_mean.h) sums as the store does, so such a job merges bit
// for bit as today (docs/elastic.md).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/kv/merge_rule.h"
#include "common/kv/step_ranks.h"

namespace dtrain::kv {

class RankSetMergeRule final : public MergeRule {
 public:
  // `ranks` must outlive the rule.
  explicit RankSetMergeRule(const StepRanks* ranks) : ranks_(ranks) {}

  // As SyncMergeRule, with the step's generation's rank count; FAILED_PRECONDITION,
  // naming the generation, for a rank outside it.
  absl::StatusOr<PushAction> OnPush(const KeyProgress& key, int worker_rank, int64_t step) const override;
  bool CanAnswerPull(const KeyProgress& key, int64_t min_version) const override;

 private:
  const StepRanks* const ranks_;
};

}  // namespace dtrain::kv
