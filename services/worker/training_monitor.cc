#include "services/worker/training_monitor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/metrics/metrics_csv.h"

namespace dtrain::worker {
namespace {

// How often the heartbeat's speed is refreshed: the scheduler sends it on with every
// heartbeat (one a second), so faster would be unseen. The step goes every step.
constexpr absl::Duration kReportEvery = absl::Seconds(1);

}  // namespace

TrainingMonitor::TrainingMonitor(Cluster& cluster, KVStore& kv, WorkerMetrics* metrics, std::string csv_path)
    : cluster_(cluster), kv_(kv), metrics_(metrics), csv_path_(std::move(csv_path)), report_start_(absl::Now()) {
  last_stats_ = kv_.stats();
}

void TrainingMonitor::StartEpoch(int64_t epoch) {
  epoch_ = epoch;
  epoch_totals_ = Totals();
  epoch_totals_.start = absl::Now();
  window_ = Totals();
  window_.start = epoch_totals_.start;
  // Validation and checkpoints ran since the last report: not training speed.
  report_start_ = epoch_totals_.start;
  report_samples_ = 0;
  if (metrics_ != nullptr) metrics_->SetEpoch(epoch);
}

void TrainingMonitor::StepDone(int64_t step, int64_t samples, double loss, int64_t correct, double compute_seconds) {
  for (Totals* t : {&epoch_totals_, &window_}) {
    t->samples += samples;
    t->steps += 1;
    t->correct += correct;
    t->loss_sum += loss;
  }
  const absl::Time now = absl::Now();
  report_samples_ += samples;
  if (now - report_start_ >= kReportEvery) {
    reported_speed_ = static_cast<double>(report_samples_) / absl::ToDoubleSeconds(now - report_start_);
    report_start_ = now;
    report_samples_ = 0;
  }
  // Every step: the heartbeats sample the step at shared ticks, and a step
  // reported a second late would make a worker look behind.
  cluster_.ReportProgress(step + 1, reported_speed_);
  const PushPullTiming t = kv_.last_timing();
  ++timed_steps_;
  compute_sum_ += compute_seconds;
  push_sum_ += t.push;
  wait_sum_ += t.wait;
  pull_sum_ += t.pull;
  stalls_.StepDone(compute_seconds, t.push + t.wait + t.pull);
  if (metrics_ == nullptr) return;
  metrics_->StepDone(samples, {compute_seconds, t.push, t.wait, t.pull, t.rejoin_wait, t.replica_lag});
  const KVStoreStats stats = kv_.stats();
  metrics_->AddBytes(stats.bytes_pushed - last_stats_.bytes_pushed, stats.bytes_pulled - last_stats_.bytes_pulled,
                     stats.bytes_pushed_uncompressed - last_stats_.bytes_pushed_uncompressed);
  last_stats_ = stats;
  const Figures e = FiguresOf(epoch_totals_, now);
  metrics_->SetTrainFigures(e.loss, e.accuracy);
}

std::string TrainingMonitor::StepTimeLine() const {
  const double n = static_cast<double>(std::max<int64_t>(1, timed_steps_)) / 1000.0;  // to ms
  return absl::StrFormat("per step: compute %.2f ms, push %.2f ms, wait %.2f ms, pull %.2f ms (%d steps)",
                         compute_sum_ / n, push_sum_ / n, wait_sum_ / n, pull_sum_ / n, timed_steps_);
}

TrainingMonitor::Figures TrainingMonitor::FiguresOf(const Totals& t, absl::Time now) {
  Figures f;
  f.samples = t.samples;
  f.seconds = absl::ToDoubleSeconds(now - t.start);
  f.samples_per_sec = static_cast<double>(t.samples) / std::max(1e-9, f.seconds);
  f.loss = t.steps > 0 ? t.loss_sum / static_cast<double>(t.steps) : 0;
  f.accuracy = t.samples > 0 ? static_cast<double>(t.correct) / static_cast<double>(t.samples) : 0;
  return f;
}

TrainingMonitor::Figures TrainingMonitor::TakeWindow() {
  const absl::Time now = absl::Now();
  const Figures f = FiguresOf(window_, now);
  window_ = Totals();
  window_.start = now;
  return f;
}

TrainingMonitor::Figures TrainingMonitor::Epoch() const { return FiguresOf(epoch_totals_, absl::Now()); }

absl::Status TrainingMonitor::EpochDone(double train_seconds, double validation_accuracy) {
  if (metrics_ != nullptr) metrics_->SetValidationAccuracy(validation_accuracy);
  if (csv_path_.empty()) return absl::OkStatus();
  const Figures e = Epoch();
  metrics::EpochFigures row;
  row.epoch = epoch_;
  row.samples = e.samples;
  row.time_cost_s = train_seconds;
  row.samples_per_sec = static_cast<double>(e.samples) / std::max(1e-9, train_seconds);
  row.train_loss = e.loss;
  row.train_accuracy = e.accuracy;
  row.validation_accuracy = validation_accuracy;
  row.workers = cluster_.num_workers();
  row.unix_time = absl::ToUnixSeconds(absl::Now());
  return metrics::AppendEpochFigures(csv_path_, row);
}

}  // namespace dtrain::worker
