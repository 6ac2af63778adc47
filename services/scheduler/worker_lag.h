// How far the slowest worker trails the fastest, measured truly.
//
// Comparing each worker's latest reported step compares different moments: a worker
// at 20 steps/s whose report is 0.9 s older than another's seems 18 steps behind in
// dist_sync, where no worker can be more than one step ahead. So workers sample their
// step at shared wall-clock ticks (multiples of the heartbeat interval, each by its own
// clock: one machine's clock, or NTP's) and send the tick with the step
// (HeartbeatRequest.step_at_unix_ms). The lag is taken over the newest tick that every
// worker in the job has reported: steps of one moment, off only by clock skew.
// gRPC-free; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::scheduler {

class WorkerLagTracker {
 public:
  // Ticks kept per worker: a heartbeat may be late by a few intervals.
  static constexpr size_t kTicksKept = 16;

  // Worker `rank` was at `step` at tick `at_unix_ms` (its clock). Ticks <= 0 are not
  // samples (an early or poked heartbeat) and are ignored.
  void Record(int rank, int64_t at_unix_ms, int64_t step);

  // Over the workers `ranks` (those still in the job): the newest tick all of them
  // reported, with the spread of their steps there; nullopt when there is no such tick
  // (yet) or `ranks` is empty.
  std::optional<v1::WorkerLag> Lag(const std::vector<int>& ranks) const;

 private:
  mutable absl::Mutex mu_;
  std::map<int, std::map<int64_t, int64_t>> ticks_ ABSL_GUARDED_BY(mu_);  // rank -> tick -> step
};

// The workers of `nodes` that are in the job: neither DEAD nor FINISHED.
std::vector<int> WorkersInJob(const std::vector<v1::NodeInfo>& nodes);

}  // namespace dtrain::scheduler
