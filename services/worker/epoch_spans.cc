// Where the trainer's epoch loop goes next: rollbacks (a fixed job's), membership
// changes (an elastic job's), the starts.
#include "services/worker/epoch_spans.h"

#include <algorithm>

#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::worker {

// The run's one rollback handler, after an epoch stopped on a RollbackStatus: a server
// lost its shard and every server reloaded the snapshot of step t. The weights become
// exactly t's, and the data order goes back to t: the steps after it are recomputed on
// the same batches, bit for bit. An epoch checkpoint already written for an epoch redone
// is written again identically.
absl::StatusOr<StepPlan> RollBack(KVStore& kv, int64_t batches) {
  Recovery* const recovery = kv.recovery();
  if (recovery == nullptr) return absl::UnimplementedError("this kvstore has no rollback");
  DTRAIN_ASSIGN_OR_RETURN(const int64_t t, recovery->Rollback());
  const StepPlan plan = PlanRollback(t, batches);
  DTRAIN_LOG(WARNING) << "resuming at epoch " << plan.first_epoch << " batch " << plan.first_batch << " (step " << t
                      << ") after the rollback";
  return plan;
}

// A fixed job's epochs from `plan` on, each `batches` steps.
EpochSpan SpanOf(const StepPlan& plan, int64_t batches) {
  return {plan.first_epoch, plan.first_epoch * batches, batches, plan.first_batch};
}

// Where an elastic job's worker starts: `resumed_from` (0, or a checkpoint's epoch's
// first step), or the later step a joiner joins at or a replacement redoes (the
// store's resume step). Its epoch ends are not redone.
absl::StatusOr<EpochSpan> ElasticStart(int64_t resumed_from, ElasticSteps& steps, KVStore& kv) {
  const int64_t resume = kv.recovery() != nullptr ? kv.recovery()->resume_step() : -1;
  const int64_t first = std::max(resumed_from, resume);
  DTRAIN_ASSIGN_OR_RETURN(const EpochSpan span, steps.SpanFrom(first));
  if (first > 0) {
    DTRAIN_LOG(INFO) << "starting at epoch " << span.epoch << " batch " << span.first_batch << " (step " << first
                     << ")";
  }
  return span;
}

// After an epoch (or its part up to a membership change) stopped on `ran`: where the
// steps go on. `*span` becomes the next part to run; `*epoch_over` says whether the
// epoch in `*span` before ended (EndEpoch is due); `*left_at` (>= 0) that this worker
// left the job there. Rollbacks (a fixed job's) and membership changes (an elastic one's).
absl::Status NextSpan(const absl::Status& ran, absl::Duration sync_timeout, KVStore& kv,
                      ClusterElastic* elastic_cluster, ElasticSteps* steps, int64_t batches, EpochSpan* span,
                      bool* epoch_over, int64_t* left_at) {
  *epoch_over = false;
  if (IsRollback(ran)) {
    DTRAIN_ASSIGN_OR_RETURN(const StepPlan plan, RollBack(kv, batches));
    *span = SpanOf(plan, batches);
    return absl::OkStatus();
  }
  if (IsMembershipChanged(ran) && steps != nullptr) {
    DTRAIN_ASSIGN_OR_RETURN(const RedoPlan redo, steps->AfterChange(*elastic_cluster, MembershipChangedStep(ran),
                                                                    absl::Now() + sync_timeout));
    if (redo.left) {
      *left_at = redo.step;
      return absl::OkStatus();
    }
    DTRAIN_ASSIGN_OR_RETURN(const EpochSpan next, steps->SpanFrom(redo.step));
    // Dealt again, what was left of the epoch may hold no batch for the new workers:
    // the epoch ended at the refused step.
    *epoch_over = next.epoch != span->epoch;
    if (*epoch_over) span->batches = redo.step - span->first_step;
    *span = *epoch_over ? *span : next;
    return absl::OkStatus();
  }
  DTRAIN_RETURN_IF_ERROR(ran);
  *epoch_over = true;
  return absl::OkStatus();
}

}  // namespace dtrain::worker
