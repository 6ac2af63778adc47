// Dynamic batching: requests queue here, and a runner thread runs several of them as
// one forward pass.
//
// Small requests are the common case (one image per call from interactive clients),
// and a forward of one image costs more per image than a forward of eight: the per-call
// overhead (operator dispatch, thread hand-offs, memory) is paid once per batch. So a
// runner takes the oldest queued request and waits for company: it runs once the queued
// requests of the same group (the same loaded model) hold the batch's target of images,
// or once the oldest has waited `max_delay`, whichever comes first. A request larger
// than `max_batch_size` runs alone.
//
// The target is each runner's share of the requests seen in flight lately (queued or
// running, the most at any moment over the last one to two seconds), at most
// `max_batch_size` and at most what is not running already. A fixed target of
// max_batch_size starves runners: with 8 closed-loop clients and 2 runners, one runner
// waits for all 8 while the other idles, and the clients wait for both in turn
// (measured: 0.61x the in-process throughput against 0.75x with batches of 4). And a
// lone client would wait `max_delay` on every call for company that never comes. A
// burst after a quiet spell runs its first request alone (nothing was in flight
// lately) and batches the rest.
//
// No gRPC and no LibTorch here: what a batch does is injected (RunBatch), so the queue,
// the timing and the hand-back are unit-tested with plain functions.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dtrain::inference {

struct BatcherOptions {
  // Images per batch; a single larger request still runs (alone).
  int64_t max_batch_size = 8;
  // Longest the oldest queued request waits for others before its batch runs anyway.
  absl::Duration max_delay = absl::Microseconds(500);
  // Batches running at once (each on its own thread).
  int runners = 1;
};

// One caller's request as the batcher sees it. The caller owns it and keeps it alive
// until Submit returns; RunBatch writes the answer into it.
class BatchJob {
 public:
  virtual ~BatchJob() = default;
  // Jobs share a batch only with jobs of the same group: the model they were checked
  // against, so a hot reload never mixes two models in one forward.
  virtual const void* group() const = 0;
  // Images in this job (>= 1).
  virtual int64_t rows() const = 0;
};

class DynamicBatcher {
 public:
  // Runs one batch: jobs of one group, oldest first, holding at most max_batch_size
  // images together (or one larger job). It answers every job (errors included) in the
  // job itself. Called on a runner thread with no lock held.
  using RunBatch = std::function<void(const std::vector<BatchJob*>& jobs)>;
  // Told of every batch before it runs: its jobs and images (for metrics).
  using BatchObserver = std::function<void(int jobs, int64_t rows)>;

  DynamicBatcher(BatcherOptions options, RunBatch run, BatchObserver observer = nullptr);
  // Stop(), then joins the runners.
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues `job` and waits until a batch has run it: OK once RunBatch has answered it
  // (its own error, if any, is in the job). DEADLINE_EXCEEDED if `deadline` passes while
  // it is still queued: it leaves the queue and never runs. A job already taken into a
  // batch is waited for to the end of that forward (milliseconds), since RunBatch reads
  // the caller's memory. UNAVAILABLE when the batcher is stopping.
  absl::Status Submit(BatchJob& job, absl::Time deadline);

  // Runners finish the batch in hand and exit; queued and later jobs get UNAVAILABLE.
  void Stop();

  const BatcherOptions& options() const { return options_; }

 private:
  enum class State { kQueued, kRunning, kDone };
  struct Entry {
    BatchJob* job;
    int64_t rows;
    absl::Time enqueued;
    State state = State::kQueued;
    absl::Status status;
  };

  void RunnerLoop();
  // With mu_ held and this runner forming: waits until the oldest job's batch is full
  // or due, then takes it out of the queue. Empty when the queue emptied meanwhile
  // (every job left at its deadline) or on Stop.
  std::vector<Entry*> FormBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t RowsQueuedFor(const void* group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the rows in flight now (queued + running) in the current window.
  void NoteInFlight(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Images a batch waits for: ceil(peak in flight lately / runners), less what runs
  // now, in [1, max_batch_size].
  int64_t TargetRows(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BatcherOptions options_;
  const RunBatch run_;
  const BatchObserver observer_;

  absl::Mutex mu_;
  std::deque<Entry*> queue_ ABSL_GUARDED_BY(mu_);  // oldest first; entries live in Submit's frame
  bool forming_ ABSL_GUARDED_BY(mu_) = false;      // one runner gathers a batch at a time
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t rows_queued_ ABSL_GUARDED_BY(mu_) = 0;   // every group
  int64_t rows_running_ ABSL_GUARDED_BY(mu_) = 0;  // taken into batches, not yet done
  // The most rows in flight at once in the current and the previous window.
  int64_t peak_now_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_before_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::vector<std::thread> runners_;
};

}  // namespace dtrain::inference
