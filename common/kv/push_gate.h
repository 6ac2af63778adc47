// Whether a worker's push may reach the store now, for a store whose workers change
// while the job runs (docs/elastic.md; implemented by elastic::MembershipGate). A
// server without one hands every push to the store.
#pragma once

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace dtrain::kv {

// Thread-safe: every PushPull stream asks it for each of its pushes.
class PushGate {
 public:
  virtual ~PushGate() = default;
  // When a push of `step` from a worker running membership generation `generation`
  // may go to the store now, runs `push` (the store's Push of it) and returns its
  // status; else returns why not without running it (UNAVAILABLE: the worker retries;
  // ABORTED: it redoes the step in a newer generation). No membership change comes
  // between the decision and `push`, so a change that takes a step back never misses
  // a push that was let through.
  virtual absl::Status PushIfAdmitted(int64_t step, int generation, absl::FunctionRef<absl::Status()> push) = 0;
};

}  // namespace dtrain::kv
