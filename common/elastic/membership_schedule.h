// Which workers a job's steps are merged from: the membership schedule of an elastic
// job (docs/elastic.md). Generations g = 0, 1, ... each name the step they start at
// and the worker ranks whose pushes every step of theirs merges; ranks keep their
// number for the whole job, so a leaver leaves a gap and a joiner takes the lowest
// free rank. A job that is not elastic has one generation, {0 .. n-1} from step 0.
//
// A value type with its rules checked on every way in (Create, Append): holding one
// means the rules hold. Not thread-safe; copy it where several threads read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtrain::elastic {

struct Generation {
  int64_t from_step = 0;
  std::vector<int> ranks;  // strictly ascending
};

bool operator==(const Generation& a, const Generation& b);

class MembershipSchedule {
 public:
  // A job that never changes: ranks 0 .. num_workers - 1 from step 0, bounds
  // num_workers:num_workers. num_workers must be at least 1.
  static MembershipSchedule Fixed(int num_workers);

  // Checks the rules (INVALID_ARGUMENT naming the generation and the field that
  // breaks one): 1 <= min_workers <= max_workers; at least one generation; the first
  // from step 0; generation 1 from a step after 0; each later from_step at or after the
  // one before (equal: the one before is zero-length, merging no step, as when a joiner
  // died before its first step and its join was replaced; IndexAt never returns it);
  // ranks strictly ascending, each in [0, max_workers); each generation min_workers ..
  // max_workers ranks.
  static absl::StatusOr<MembershipSchedule> Create(int min_workers, int max_workers,
                                                   std::vector<Generation> generations);

  // Adds the next generation, under the same rules; nothing changes on error.
  absl::Status Append(Generation next);

  // The index of the generation that step `step` (>= 0) is merged by: the last one
  // starting at or before it, never a zero-length one.
  int IndexAt(int64_t step) const;
  const Generation& At(int64_t step) const { return generations_[IndexAt(step)]; }
  const Generation& latest() const { return generations_.back(); }
  const std::vector<Generation>& generations() const { return generations_; }
  int min_workers() const { return min_workers_; }
  int max_workers() const { return max_workers_; }

  // The lowest rank below max_workers that the latest generation does not hold;
  // RESOURCE_EXHAUSTED ("all 4 worker ranks are taken (--elastic 2:4)") when none.
  absl::StatusOr<int> LowestFreeRank() const;

  // The membership a job resumed at `step` (> 0, an epoch's first: a checkpoint's)
  // starts with: the generations before `step`, then the one in force there with its k
  // workers numbered 0 .. k-1 (from `step`, unless they are so numbered already), as
  // a resumed job starts its workers. Later generations are left out.
  MembershipSchedule ResumedAt(int64_t step) const;

  // "generation 2 from step 180, workers {0,1,3}": what logs and refusals name.
  std::string Describe(int index) const;

  // Whether generation `index` merges no step: the next one starts where it does.
  bool ZeroLength(int index) const;

  friend bool operator==(const MembershipSchedule& a, const MembershipSchedule& b);

 private:
  MembershipSchedule(int min_workers, int max_workers) : min_workers_(min_workers), max_workers_(max_workers) {}
  // Whether `g` may follow the generations held (index: the one it would be).
  absl::Status CheckNext(const Generation& g, int index) const;

  int min_workers_;
  int max_workers_;
  std::vector<Generation> generations_;
};

// "{0,1,3}".
std::string RankSetText(const std::vector<int>& ranks);

}  // namespace dtrain::elastic
