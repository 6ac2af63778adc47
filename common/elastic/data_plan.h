// Which examples each worker trains on at each step of an elastic job, as a pure
// function of (seed, dataset size, batch size, membership schedule): every example
// is used at most once an epoch whatever the changes, and with one generation
// {0 .. n-1} the batches are today's (services/worker/dataset.h Partition + EpochOrder).
//
// An epoch is a run of segments, one per generation live in it. A segment starts with
// the pool of the epoch's examples not used yet (all at the epoch's start), ascending,
// and k ranks: the j-th rank (ascending) takes pool[j], pool[j+k], ... of the first
// floor(|pool|/k)*k, shuffles its share (seeded by seed, epoch, j; plus the
// segment's first step when the segment starts mid-epoch) and takes its batches from
// the shuffled share in order. The segment ends at the next generation's step, or when
// a share has no full batch left, which ends the epoch. docs/elastic.md.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/elastic/membership_schedule.h"

namespace dtrain::elastic {

// Where a step falls.
struct StepPlace {
  int64_t epoch = 0;
  int64_t epoch_first_step = 0;
  int64_t epoch_steps = 0;         // steps the epoch has in all
  int64_t segment_first_step = 0;  // the step the step's segment starts at
  int generation = 0;              // the schedule's index of the step's generation
};

class DataPlan {
 public:
  DataPlan(int64_t seed, int64_t num_examples, int64_t batch_size, MembershipSchedule schedule);

  // Where step `step` (>= 0) falls. INVALID_ARGUMENT when an epoch would have no step
  // (fewer examples than the workers need for one batch each), naming the counts.
  absl::StatusOr<StepPlace> Place(int64_t step) const;

  // The examples (indices into [0, num_examples)) of rank `rank`'s batch at step
  // `step`, in batch order. INVALID_ARGUMENT when `rank` is not in the step's
  // generation, naming the generation.
  // Deals the epoch again up to the step's segment: O(examples) a call.
  absl::StatusOr<std::vector<int64_t>> Batch(int64_t step, int rank) const;

  // Rank `rank`'s shuffled share of the segment step `step` is in, in batch order: its
  // batch at step t of the segment is elements [(t - segment_first_step) * B, + B).
  // What a worker computes once a segment (Batch's cost, once). Errors as Batch's.
  struct SegmentShare {
    StepPlace place;
    std::vector<int64_t> examples;
  };
  absl::StatusOr<SegmentShare> Share(int64_t step, int rank) const;

  // The step epoch `epoch` (>= 0) starts at: the steps of the epochs before it, as the
  // schedule made them. Errors as Place's. O(epoch) Place calls.
  absl::StatusOr<int64_t> EpochFirstStep(int64_t epoch) const;

  const MembershipSchedule& schedule() const { return schedule_; }

 private:
  // The steps the segment starting at `first` with `pool` examples left runs for
  // (0: no full batch left), and whether it ends the epoch.
  struct SegmentLength {
    int64_t steps = 0;
    bool ends_epoch = false;
  };
  SegmentLength Segment(int64_t first, int64_t pool) const;

  const int64_t seed_;
  const int64_t num_examples_;
  const int64_t batch_size_;
  const MembershipSchedule schedule_;
};

// A permutation of [0, n), the same on every platform: Fisher-Yates on mt19937_64
// seeded by seed_seq{words...} (std::shuffle's use of the engine is
// implementation-defined). With words {seed, epoch, rank} it is EpochOrder's.
std::vector<int64_t> SeededOrder(int64_t n, const std::vector<uint64_t>& words);

}  // namespace dtrain::elastic
