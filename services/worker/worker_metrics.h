// A worker's metrics (dtrain_worker_*): progress, training figures, where each step's
// time goes, and the bytes it moved. Cheap enough to call every step: each call is a
// few atomic updates (a histogram observation takes a short uncontended lock).
#pragma once

#include <cstdint>

#include "common/metrics/registry.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace dtrain::worker {

// Seconds one training step spent in each phase (dtrain_worker_step_seconds{phase}).
struct StepPhases {
  double compute = 0;       // forward + backward (and the batch's gather)
  double push = 0;          // building and submitting the push requests
  double wait = 0;          // until the first answer: in sync mode, waiting for the other workers
  double pull = 0;          // from the first answer until every key's weights are in
  double rejoin_wait = 0;   // part of wait + pull spent on a dead worker that could be replaced
  double replica_lag = -1;  // --replication > 1: backups' answers after the weights (< 0: none)
};

class WorkerMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit WorkerMetrics(metrics::MetricsRegistry& registry);

  void StepDone(int64_t samples, const StepPhases& phases);
  // One step's bytes: pushed on the wire (compressed with --gc-type), pulled, and the
  // pushes' float32 size (-1: as pushed, i.e. uncompressed).
  void AddBytes(int64_t pushed, int64_t pulled, int64_t pushed_uncompressed = -1);
  void SetEpoch(int64_t epoch);
  // Means over the current epoch so far.
  void SetTrainFigures(double loss, double accuracy);
  void SetValidationAccuracy(double accuracy);

 private:
  prometheus::Counter* samples_;
  prometheus::Counter* steps_;
  prometheus::Counter* pushed_bytes_;
  prometheus::Counter* pulled_bytes_;
  prometheus::Counter* pushed_uncompressed_bytes_;
  prometheus::Gauge* step_pushed_wire_;
  prometheus::Gauge* step_pushed_uncompressed_;
  prometheus::Counter* rejoin_wait_;
  prometheus::Histogram* replica_lag_;
  prometheus::Gauge* epoch_;
  prometheus::Gauge* train_loss_;
  prometheus::Gauge* train_accuracy_;
  prometheus::Gauge* validation_accuracy_;
  prometheus::Histogram* compute_;
  prometheus::Histogram* push_;
  prometheus::Histogram* wait_;
  prometheus::Histogram* pull_;
};

}  // namespace dtrain::worker
