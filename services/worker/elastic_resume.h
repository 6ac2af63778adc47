// An elastic job's checkpoints and their resume (docs/elastic.md, "Checkpoints"): with
// each checkpoint the worker that writes it saves the membership a resume starts with
// (PREFIX-NNNN.membership.json, MembershipSchedule::ResumedAt), and a job started with
// --load-epoch finds where its epoch begins from the membership the scheduler started
// with, which must be that file's (dtrain launch passes it as --resume-membership).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/elastic/membership_schedule.h"

namespace dtrain::worker {

// Writes the membership a resume of checkpoint `epoch` starts with: `schedule` as the
// worker knows it at `step`, the first step after that epoch. Atomic.
absl::Status SaveCheckpointMembership(const std::string& prefix, int epoch, const elastic::MembershipSchedule& schedule,
                                      int64_t step);

// The step a job resumed from checkpoint `load_epoch` (> 0) starts at: that epoch's
// first by the data plan of `schedule` (the scheduler's, dealing `num_examples` in
// batches of `batch_size` seeded by `seed`). FAILED_PRECONDITION naming the file and
// --resume-membership when the checkpoint has no membership file or the scheduler
// started with another membership.
absl::StatusOr<int64_t> ElasticResumeStep(const std::string& prefix, int64_t load_epoch, int64_t seed,
                                          int64_t num_examples, int64_t batch_size,
                                          const elastic::MembershipSchedule& schedule);

}  // namespace dtrain::worker
