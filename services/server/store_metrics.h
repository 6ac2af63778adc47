// Feeds what the ShardStore reports (kv::StoreObserver) into the server's Prometheus
// metrics, so that the store itself stays free of prometheus.
#pragma once

#include "absl/time/time.h"
#include "common/kv/shard_store.h"
#include "services/server/server_metrics.h"

namespace dtrain::server {

class StoreMetrics final : public kv::StoreObserver {
 public:
  // `metrics` must outlive this object.
  explicit StoreMetrics(server::ServerMetrics* metrics) : metrics_(metrics) {}

  void OnUpdateApplied(absl::Duration took) override { metrics_->UpdateApplied(absl::ToDoubleSeconds(took)); }
  void OnSyncStepMerged(absl::Duration wait) override { metrics_->SyncStepMerged(absl::ToDoubleSeconds(wait)); }
  void OnAsyncPushApplied(int64_t staleness) override { metrics_->PushStaleness(staleness); }
  void OnSspPushTaken(int64_t lag) override { metrics_->PushStaleness(lag); }
  void OnWorkerSeen(int /*worker_rank*/) override { metrics_->WorkerSeen(); }
  void OnParkedPulls(int64_t delta) override { metrics_->ParkedPulls(delta); }

 private:
  server::ServerMetrics* metrics_;
};

}  // namespace dtrain::server
