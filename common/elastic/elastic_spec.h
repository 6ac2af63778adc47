// The elastic settings of a job (docs/elastic.md): --elastic MIN:MAX (DTRAIN_ELASTIC),
// --elastic-lr scale|keep, --replay-membership FILE. Parsed and checked here, in the
// style of common/job_spec.h; the programs declare them (AddElasticFlags) once their
// runtime honours them.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/flags.h"
#include "common/kvstore_mode.h"

namespace dtrain::elastic {

// What the learning rate does when the worker count changes.
enum class ElasticLr {
  kScale,  // lr * (workers now) / (workers the job started with): the linear scaling rule
  kKeep,   // unchanged
};

// The most ranks an elastic job may span: what a parameter server accepts at most
// (kv::StoreLimits::max_workers' default).
inline constexpr int kMaxElasticWorkers = 10000;

struct ElasticSpec {
  // 0:0: not elastic (the worker count is fixed at --num-workers).
  int min_workers = 0;
  int max_workers = 0;
  ElasticLr lr = ElasticLr::kScale;
  // A recorded schedule (membership_file.h) to replay; empty: none.
  std::string replay_membership;
  // The membership a checkpoint's resume starts with (PREFIX-NNNN.membership.json,
  // membership_file.h); empty: a fresh start, workers 0 .. n-1 from step 0.
  std::string resume_membership;

  bool enabled() const { return max_workers > 0; }
};

// "2:4" -> {2, 4}; "" -> 0:0 (not elastic). INVALID_ARGUMENT naming the flag and the
// text for anything else: not two integers, MIN below 1, MAX below MIN ("--elastic
// 3:2: MIN 3 is above MAX 2"), MAX over kMaxElasticWorkers.
absl::StatusOr<ElasticSpec> ParseElasticBounds(absl::string_view text);

// "scale" or "keep"; INVALID_ARGUMENT naming both otherwise.
absl::StatusOr<ElasticLr> ParseElasticLr(absl::string_view text);
absl::string_view ElasticLrName(ElasticLr lr);

// After parsing, against the job's shape: -n within MIN..MAX ("--num-workers 5 is above
// --elastic's MAX 4"), a mode that merges per step (dist_sync), --elastic-lr and
// --replay-membership and --resume-membership only with --elastic, not both.
// INVALID_ARGUMENT naming the flags.
absl::Status CheckElasticSpec(const ElasticSpec& spec, int64_t num_workers, KVStoreMode mode);

// The factor the lr is multiplied by while `workers_now` workers step, in a job that
// started with `workers_at_start`.
double ElasticLrFactor(ElasticLr lr, int workers_now, int64_t workers_at_start);

// Declares --elastic (also from DTRAIN_ELASTIC), --elastic-lr, --replay-membership and
// --resume-membership, bound to `spec`.
void AddElasticFlags(FlagSet& flags, ElasticSpec* spec);

}  // namespace dtrain::elastic
