// A parameter server's metrics (dtrain_server_*): requests and bytes, how long sync
// steps wait for their last worker, updates applied, workers seen, and in async mode
// how stale the applied pushes are. Every method is safe from any thread and cheap
// (the store calls some of them with a key's lock held).
#pragma once

#include <cstdint>

#include "common/kv/request_observer.h"
#include "common/metrics/registry.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace dtrain::server {

// The request counts and bytes come from each stream's PushPullHandler
// (kv::RequestObserver).
class ServerMetrics final : public kv::RequestObserver {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit ServerMetrics(metrics::MetricsRegistry& registry);

  void PushReceived(int64_t bytes) override;
  // A push's gradient as floats: its bytes uncompressed (= the bytes received unless
  // the push was compressed), so that push_bytes / this is the compression ratio.
  void PushUnpacked(int64_t bytes) override;
  void PullRequested() override;
  // `bytes` sent; `weight_bytes`: what the weights are as float32s (more than `bytes`
  // when the answer is a packed change, --pull-gc-type).
  void PullAnswered(int64_t bytes, int64_t weight_bytes) override;
  void RequestFailed() override;
  // One key's sync step merged, `seconds` after its first worker's push.
  void SyncStepMerged(double seconds);
  // An async push was applied `staleness` updates after its worker last pulled the key.
  void PushStaleness(int64_t staleness);  // async staleness, or a dist_ssp push's lag
  void UpdateApplied(double seconds);
  void WorkerSeen();
  // Pulls parked (delta > 0) or no longer parked.
  void ParkedPulls(int64_t delta);
  // Replication: one key copied (`ok`) or not to a restarted chain member while its
  // version's answers were held for `held_seconds` (replica_catch_up.h).
  void CatchUpCopy(double held_seconds, bool ok);

 private:
  prometheus::Counter* push_requests_;
  prometheus::Counter* pull_requests_;
  prometheus::Counter* push_bytes_;
  prometheus::Counter* push_unpacked_bytes_;
  prometheus::Counter* pull_bytes_;
  prometheus::Counter* pull_weight_bytes_;
  prometheus::Counter* request_errors_;
  prometheus::Counter* updates_;
  prometheus::Counter* update_seconds_;
  prometheus::Gauge* workers_seen_;
  prometheus::Gauge* parked_pulls_;
  prometheus::Histogram* sync_wait_;
  prometheus::Histogram* staleness_;
  prometheus::Histogram* catch_up_hold_;
  prometheus::Counter* catch_up_ok_;
  prometheus::Counter* catch_up_failed_;
};

}  // namespace dtrain::server
