#include "services/server/snapshot_metrics.h"

#include "common/metrics/families.h"

namespace dtrain::server {

using metrics::internal::AddCounter;
using metrics::internal::AddGauge;
using metrics::internal::AddHistogram;

SnapshotMetrics::SnapshotMetrics(metrics::MetricsRegistry& registry) {
  prometheus::Registry& r = registry.families();
  seconds_ = &AddHistogram(r, "dtrain_server_snapshot_seconds",
                           "Seconds to encode and atomically write one shard snapshot (--snapshot-every).",
                           metrics::internal::SecondsBuckets());
  bytes_ = &AddGauge(r, "dtrain_server_snapshot_bytes", "Size in bytes of the last shard snapshot written.");
  written_ = &AddCounter(r, "dtrain_server_snapshots_total", "Shard snapshots written.");
  failed_ = &AddCounter(r, "dtrain_server_snapshot_failures_total",
                        "Shard snapshots that could not be written (the log says why).");
}

void SnapshotMetrics::Written(double seconds, int64_t bytes) {
  seconds_->Observe(seconds);
  bytes_->Set(static_cast<double>(bytes));
  written_->Increment();
}

void SnapshotMetrics::Failed() { failed_->Increment(); }

}  // namespace dtrain::server
