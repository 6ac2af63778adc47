// Which processes may speak for a worker rank at a parameter server (docs/recovery.md):
// the job's id, and per rank the highest incarnation seen. A worker that died and was
// replaced (same rank, incarnation + 1) fences its predecessor, which may still be
// alive (paused, partitioned) and must not push or pull any more.
//
// Thread-safe. Requests that say nothing (empty job id, incarnation 0: clients from
// before recovery) are let through unchecked, so old workers keep working.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace dtrain::kv {

// A job id is a launcher- or Helm-made name; anything longer is refused before it is
// kept or echoed into an error.
inline constexpr size_t kMaxJobIdBytes = 64;

class WorkerFence {
 public:
  // Ranks 0 .. num_workers - 1.
  explicit WorkerFence(int num_workers);

  struct Admission {
    // This request's incarnation is newer than any seen for its rank: whatever the
    // older one left behind (parked pulls) must go.
    bool raised = false;
    uint64_t replaced = 0;  // the incarnation it replaced (0: none seen before)
  };

  // Whether a request from `worker_rank` (in range: the caller checked) of job `job_id`
  // and incarnation `incarnation` may proceed; raises the rank's incarnation when newer.
  // The first non-empty job id seen becomes the server's, unless SetJobId came first.
  // Errors (FAILED_PRECONDITION): another job ("worker 1 belongs to job 'job-b', but
  // this server runs job 'job-a'"), an older incarnation ("fenced: worker 1
  // incarnation 1 replaced by 2"); INVALID_ARGUMENT: a job id over kMaxJobIdBytes.
  absl::StatusOr<Admission> Admit(int worker_rank, absl::string_view job_id, uint64_t incarnation);

  // The job this server belongs to (from its flags or the scheduler); refused
  // (FAILED_PRECONDITION naming both) if another was already adopted.
  absl::Status SetJobId(absl::string_view job_id);
  std::string job_id() const;
  // The highest incarnation seen for `worker_rank` (0: none).
  uint64_t incarnation(int worker_rank) const;

 private:
  absl::Status CheckJob(int worker_rank, absl::string_view job_id);

  const int num_workers_;
  // Read on every request without a lock; raised by compare-and-swap.
  std::unique_ptr<std::atomic<uint64_t>[]> highest_;
  mutable absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> has_job_id_{false};  // job_id_ is set and will not change
};

}  // namespace dtrain::kv
