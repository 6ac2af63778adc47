// Where the trainer's epoch loop goes next (no LibTorch): a fixed job's epochs from its
// StepPlan, going back to the servers' snapshot on a rollback; an elastic job's from
// its data plan (ElasticSteps), redoing a step a membership change refused in the
// generation that holds it, or leaving the job.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/worker/cluster_elastic.h"
#include "services/worker/elastic_steps.h"
#include "services/worker/kv/kvstore.h"
#include "services/worker/step_plan.h"

namespace dtrain::worker {

// The run's one rollback handler, after an epoch stopped on a RollbackStatus: the
// weights become exactly the order's step t's (Recovery::Rollback) and the data order
// goes back to t: the steps after it are recomputed on the same batches, bit for bit.
absl::StatusOr<StepPlan> RollBack(KVStore& kv, int64_t batches);

// A fixed job's epoch of `plan`, each epoch `batches` steps.
EpochSpan SpanOf(const StepPlan& plan, int64_t batches);

// Where an elastic job's worker starts: `resumed_from` (0, or the first step of the
// epoch --load-epoch resumes: ElasticResumeStep), or the later step a joiner joins at
// or a replacement redoes (the store's resume step).
absl::StatusOr<EpochSpan> ElasticStart(int64_t resumed_from, ElasticSteps& steps, KVStore& kv);

// After RunEpoch of `*span` returned `ran`: OK with `*epoch_over` when the epoch is done
// (EndEpoch of `*span` is due; for an elastic job `*span` may end early, at a refused
// step that the new membership puts in the next epoch); OK without it when `*span` is
// the next part to run (after a rollback, or a redo in the same epoch); OK with
// `*left_at` >= 0 when this worker left the job at that step (its rank is not in the
// generation that holds it); else `ran`'s error, or the wait's for the new membership
// (`sync_timeout`). `elastic_cluster` and `steps`: null for a fixed job.
absl::Status NextSpan(const absl::Status& ran, absl::Duration sync_timeout, KVStore& kv,
                      ClusterElastic* elastic_cluster, ElasticSteps* steps, int64_t batches, EpochSpan* span,
                      bool* epoch_over, int64_t* left_at);

}  // namespace dtrain::worker
