// An elastic job's lr schedule in epochs (--lr-step-epochs). A fixed job's servers hold
// it in updates of a key (OptimizerOptions::lr_steps: epoch e starts at update
// e * batches); an elastic job's epochs have the lengths its membership gives them
// (elastic::DataPlan), so its servers get the epochs and what decides their lengths, and
// find each step's epoch from the schedule as it is committed (server_membership.h).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace dtrain::kv {

struct EpochLrSteps {
  int64_t num_examples = 0;     // the examples an epoch deals
  int64_t batch_size = 0;       // per worker
  std::vector<int64_t> epochs;  // ascending, >= 1; empty: no schedule

  bool enabled() const { return !epochs.empty(); }
  friend bool operator==(const EpochLrSteps& a, const EpochLrSteps& b) {
    return a.num_examples == b.num_examples && a.batch_size == b.batch_size && a.epochs == b.epochs;
  }
};

// At most this many epochs (as OptimizerOptions::lr_steps on the wire).
inline constexpr int kMaxEpochLrSteps = 10000;

// INVALID_ARGUMENT naming the field: a count or size below 1, epochs not ascending or
// below 1, too many. OK for one that is not enabled().
absl::Status CheckEpochLrSteps(const EpochLrSteps& steps);

}  // namespace dtrain::kv
