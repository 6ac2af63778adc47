#include "services/worker/worker_metrics.h"

#include "common/metrics/families.h"

namespace dtrain::worker {

using metrics::internal::AddCounter;
using metrics::internal::AddGauge;
using metrics::internal::AddHistogram;

WorkerMetrics::WorkerMetrics(metrics::MetricsRegistry& registry) {
  prometheus::Registry& r = registry.families();
  samples_ = &AddCounter(r, "dtrain_worker_samples_total", "Training samples processed by this worker.");
  steps_ = &AddCounter(r, "dtrain_worker_steps_total", "Training steps (batches) completed by this worker.");
  pushed_bytes_ = &AddCounter(r, "dtrain_worker_pushed_bytes_total", "Gradient bytes pushed to the servers.");
  pulled_bytes_ = &AddCounter(r, "dtrain_worker_pulled_bytes_total", "Weight bytes pulled from the servers.");
  pushed_uncompressed_bytes_ =
      &AddCounter(r, "dtrain_worker_pushed_uncompressed_bytes_total",
                  "The pushed gradients' size as float32s: pushed_bytes_total without --gc-type compression "
                  "(this over pushed_bytes_total is the compression ratio).");
  const char* kStepBytes = "dtrain_worker_step_pushed_bytes";
  const char* kStepBytesHelp =
      "Bytes the last step pushed: on the wire (compressed with --gc-type) and as float32 gradients.";
  step_pushed_wire_ = &AddGauge(r, kStepBytes, kStepBytesHelp, {{"encoding", "wire"}});
  step_pushed_uncompressed_ = &AddGauge(r, kStepBytes, kStepBytesHelp, {{"encoding", "float32"}});
  rejoin_wait_ = &AddCounter(r, "dtrain_worker_rejoin_wait_seconds_total",
                             "Seconds this worker's steps waited past the sync timeout for a dead worker "
                             "to be replaced (--rejoin-timeout).");
  replica_lag_ = &AddHistogram(r, "dtrain_worker_replica_lag_seconds",
                               "Replication (--replication > 1): per step, the longest a key's backup replicas "
                               "answered after its weights were in.",
                               metrics::internal::SecondsBuckets());
  epoch_ = &AddGauge(r, "dtrain_worker_epoch", "The epoch being trained (0-based, as in the logs).");
  train_loss_ = &AddGauge(r, "dtrain_worker_train_loss", "Mean training cross-entropy over the current epoch so far.");
  train_accuracy_ =
      &AddGauge(r, "dtrain_worker_train_accuracy", "Training accuracy over the current epoch so far (0..1).");
  validation_accuracy_ = &AddGauge(r, "dtrain_worker_validation_accuracy",
                                   "Accuracy on the test set after the last finished epoch (0..1).");
  const char* kStep = "dtrain_worker_step_seconds";
  const char* kStepHelp =
      "Seconds per training step by phase: compute (forward+backward), push (submitting gradients), "
      "wait (until the first answer: other workers, in sync mode), pull (until all weights are in).";
  const auto& b = metrics::internal::SecondsBuckets();
  compute_ = &AddHistogram(r, kStep, kStepHelp, b, {{"phase", "compute"}});
  push_ = &AddHistogram(r, kStep, kStepHelp, b, {{"phase", "push"}});
  wait_ = &AddHistogram(r, kStep, kStepHelp, b, {{"phase", "wait"}});
  pull_ = &AddHistogram(r, kStep, kStepHelp, b, {{"phase", "pull"}});
}

void WorkerMetrics::StepDone(int64_t samples, const StepPhases& phases) {
  samples_->Increment(static_cast<double>(samples));
  steps_->Increment();
  compute_->Observe(phases.compute);
  push_->Observe(phases.push);
  wait_->Observe(phases.wait);
  pull_->Observe(phases.pull);
  if (phases.rejoin_wait > 0) rejoin_wait_->Increment(phases.rejoin_wait);
  if (phases.replica_lag >= 0) replica_lag_->Observe(phases.replica_lag);
}

void WorkerMetrics::AddBytes(int64_t pushed, int64_t pulled, int64_t pushed_uncompressed) {
  if (pushed_uncompressed < 0) pushed_uncompressed = pushed;
  step_pushed_wire_->Set(static_cast<double>(pushed));
  step_pushed_uncompressed_->Set(static_cast<double>(pushed_uncompressed));
  if (pushed_uncompressed > 0) pushed_uncompressed_bytes_->Increment(static_cast<double>(pushed_uncompressed));
  if (pushed > 0) pushed_bytes_->Increment(static_cast<double>(pushed));
  if (pulled > 0) pulled_bytes_->Increment(static_cast<double>(pulled));
}

void WorkerMetrics::SetEpoch(int64_t epoch) { epoch_->Set(static_cast<double>(epoch)); }

void WorkerMetrics::SetTrainFigures(double loss, double accuracy) {
  train_loss_->Set(loss);
  train_accuracy_->Set(accuracy);
}

void WorkerMetrics::SetValidationAccuracy(double accuracy) { validation_accuracy_->Set(accuracy); }

}  // namespace dtrain::worker
