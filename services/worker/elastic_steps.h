// An elastic worker's steps (docs/elastic.md): which examples it trains on at each
// step (elastic::DataPlan, its share dealt once a segment), the membership generation
// its pushes carry, and what it does when a push is refused "membership changed" at
// step S: wait for the new membership, then redo step S in the generation that holds
// it, or leave the job when that generation does not hold its rank. No LibTorch and
// no gRPC: the trainer turns the indices into tensors, the cluster waits.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/elastic/data_plan.h"
#include "common/elastic/membership_proto.h"
#include "services/worker/cluster_elastic.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {

// Where an epoch's steps run: what the trainer's epoch loop runs next.
struct EpochSpan {
  int64_t epoch = 0;
  int64_t first_step = 0;   // the epoch's first step
  int64_t batches = 0;      // the epoch's steps in all
  int64_t first_batch = 0;  // the first to run (0 but after a resume or a redo)
};

// What to do after a push of step `step` was refused "membership changed".
struct RedoPlan {
  int64_t step = 0;    // the step to redo (the refused one)
  int generation = 0;  // the schedule's index of the generation that holds it
  bool left = false;   // that generation does not hold this rank: it leaves the job
  int workers = 0;     // the generation's worker count
};

// Decides RedoPlan for `rank` from `schedule`, which must hold a generation from `step`
// or later than the one the rank ran: pure, for the trainer and the tests.
RedoPlan PlanRedo(const elastic::MembershipSchedule& schedule, int rank, int64_t step);

// What the job trained in one epoch of an elastic job: every worker's batches of every
// step, whoever took them (a leaver's too), from the data plan; the workers that ran its
// last step, and the lowest of them, which prints the job-wide epoch line.
struct EpochTally {
  int64_t samples = 0;
  int workers_at_end = 0;
  int lowest_rank_at_end = 0;
};

// The tally of the epoch step `step` is in, from `plan` (whose schedule must hold every
// generation up to the epoch's last step: true once that step ran).
absl::StatusOr<EpochTally> TallyEpoch(const elastic::DataPlan& plan, int64_t batch_size, int64_t step);

class ElasticSteps {
 public:
  // `tag`: the store's elastic part (null: pushes are not tagged, a store without one).
  ElasticSteps(int rank, int64_t seed, int64_t num_examples, int64_t batch_size, elastic::Membership membership,
               ElasticPart* tag);

  int rank() const { return rank_; }
  const elastic::Membership& membership() const { return membership_; }
  const elastic::DataPlan& plan() const { return *plan_; }

  // The epoch that step `step` is in, run from that step.
  absl::StatusOr<EpochSpan> SpanFrom(int64_t step) const;
  // This rank's examples (indices into the whole training set) of step `step`, in batch
  // order; tags the store's pushes from now with the step's generation. The share is
  // dealt once a segment. INVALID_ARGUMENT when the step's generation does not hold the
  // rank (DataPlan::Share).
  absl::StatusOr<std::vector<int64_t>> Batch(int64_t step);

  // After MembershipChangedStatus at step `step`: waits (up to `deadline`) until
  // `cluster`'s membership has more generations than the one held, takes it (the data
  // plan dealt again) and returns what to do.
  absl::StatusOr<RedoPlan> AfterChange(ClusterElastic& cluster, int64_t step, absl::Time deadline);
  // Takes `membership` (newer than the one held) and returns what to do at `step`.
  RedoPlan Adopt(elastic::Membership membership, int64_t step);

 private:
  // Holds `membership` (newer than the one held): the data plan is dealt again.
  void Take(elastic::Membership membership);
  // What to do at `step` under the membership held; tags the pushes with its generation.
  RedoPlan RedoAt(int64_t step);

  const int rank_;
  const int64_t seed_, num_examples_, batch_size_;
  elastic::Membership membership_;
  std::optional<elastic::DataPlan> plan_;  // made again for each membership (its fields are const)
  ElasticPart* const tag_;
  std::optional<elastic::DataPlan::SegmentShare> share_;  // the current segment's
};

// A worker that registered into a running elastic job (ClusterElastic::joiner): waits up
// to `deadline` for a generation that holds `rank` and returns the step it starts at,
// logging "worker R joins at step S: K workers".
absl::StatusOr<int64_t> AwaitJoinStep(ClusterElastic& cluster, int rank, absl::Time deadline);

}  // namespace dtrain::worker
