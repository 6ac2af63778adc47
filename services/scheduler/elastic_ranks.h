// What Membership asks of an elastic job (--elastic MIN:MAX, docs/elastic.md) about
// worker ranks: the worker rank table spans MAX ranks, a worker registering after the
// start for a rank outside the job joins it, and the job is over when the latest
// generation's workers finished. ElasticJob answers; Membership calls it under its own
// lock, so an implementation must never call back into Membership.
#pragma once

#include <set>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain::scheduler {

class ElasticRanks {
 public:
  virtual ~ElasticRanks() = default;
  // MAX: the worker ranks are 0 .. MAX - 1.
  virtual int max_workers() const = 0;
  // Whether worker `rank` is in the job: in the latest generation, or given to a joiner.
  virtual bool InJob(int rank) const = 0;
  // A worker joins after the start: `requested` (a free rank below MAX) or, when -1,
  // the lowest free one not in `busy` (held by a live process: a leaver not gone yet).
  // The rank it gets, or why none (RESOURCE_EXHAUSTED naming MAX).
  virtual absl::StatusOr<int> Join(int requested, const std::set<int>& busy) = 0;
  // The latest generation's workers: the job is over when they all finished.
  virtual std::vector<int> Workers() const = 0;
};

}  // namespace dtrain::scheduler
