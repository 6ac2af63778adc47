// What one worker's training loop reports besides its weights: the running loss and
// accuracy behind the MXNet-style progress lines, its step and speed for the
// scheduler's heartbeat (hence `dtrain status`), the Prometheus metrics (when on) and,
// on worker 0 with a --model-prefix, a row per epoch in PREFIX-metrics.csv.
// No LibTorch: the trainer hands in plain numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/worker/cluster.h"
#include "services/worker/stall_advice.h"
#include "services/worker/kv/kvstore.h"
#include "services/worker/worker_metrics.h"

namespace dtrain::worker {

class TrainingMonitor {
 public:
  // `cluster`, `kv` and `metrics` (null: metrics off) must outlive the monitor.
  // `csv_path` empty: no CSV.
  TrainingMonitor(Cluster& cluster, KVStore& kv, WorkerMetrics* metrics, std::string csv_path);

  void StartEpoch(int64_t epoch);

  // One step done: `samples` trained with mean cross-entropy `loss`, `correct` of them
  // classified right; `compute_seconds` of forward+backward. The kvstore's own timing
  // of the step's PushPull is read here.
  void StepDone(int64_t step, int64_t samples, double loss, int64_t correct, double compute_seconds);

  struct Figures {
    int64_t samples = 0;
    double seconds = 0;
    double samples_per_sec = 0;
    double loss = 0;      // mean over the steps
    double accuracy = 0;  // correct / samples
  };
  // Since the previous call (or the epoch's start), for a progress line; restarts the window.
  Figures TakeWindow();
  // Since the epoch's start.
  Figures Epoch() const;

  // Where a step's time went, averaged over every step so far, for the run's last lines:
  // "per step: compute 12.10 ms, push 0.41 ms, wait 2.03 ms, pull 0.70 ms". Push, wait
  // and pull are what the step was blocked for (kvstore.h, PushPullTiming); with
  // --overlap what the next forward hid is not in them.
  std::string StepTimeLine() const;

  // For the run's last lines: whether waits for paused workers cost a noticeable part of
  // the run, and the --kv-store/--staleness that would have hidden them (stall_advice.h).
  std::optional<std::string> StallAdvice(KVStoreMode mode, int64_t staleness, bool weigh_stale) const {
    return stalls_.Advice(mode, staleness, weigh_stale);
  }

  // After validation: sets the validation gauge and appends the epoch's CSV row.
  // `train_seconds` is the epoch's training time (validation and checkpoint excluded).
  absl::Status EpochDone(double train_seconds, double validation_accuracy);

 private:
  struct Totals {
    int64_t samples = 0;
    int64_t steps = 0;
    int64_t correct = 0;
    double loss_sum = 0;
    absl::Time start;
  };
  static Figures FiguresOf(const Totals& t, absl::Time now);

  Cluster& cluster_;
  KVStore& kv_;
  WorkerMetrics* metrics_;
  const std::string csv_path_;
  int64_t epoch_ = 0;
  Totals epoch_totals_;
  Totals window_;
  // Progress for the scheduler, about once a second.
  absl::Time report_start_;
  int64_t report_samples_ = 0;
  double reported_speed_ = 0;  // samples/s over the last report period
  KVStoreStats last_stats_;
  // Sums over the run, for StepTimeLine.
  int64_t timed_steps_ = 0;
  double compute_sum_ = 0, push_sum_ = 0, wait_sum_ = 0, pull_sum_ = 0;
  StallAdvisor stalls_;
};

}  // namespace dtrain::worker
