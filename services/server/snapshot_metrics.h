// A server's snapshot metrics (docs/recovery.md, snapshots and rollback): how long writing a shard snapshot takes, how
// big it is, how many were written or failed. Safe from any thread.
#pragma once

#include <cstdint>

#include "common/metrics/registry.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace dtrain::server {

class SnapshotMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit SnapshotMetrics(metrics::MetricsRegistry& registry);

  // One snapshot file written: `seconds` to encode and write it, `bytes` its size.
  void Written(double seconds, int64_t bytes);
  void Failed();

 private:
  prometheus::Histogram* seconds_;
  prometheus::Gauge* bytes_;
  prometheus::Counter* written_;
  prometheus::Counter* failed_;
};

}  // namespace dtrain::server
