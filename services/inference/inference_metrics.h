// dtrain-infer's metrics (dtrain_inference_*): requests by result code, their latency,
// the checkpoint epoch being served, and images per forward pass (dynamic batching). Usage, in the inference service's
// main:
//   DTRAIN_ASSIGN_OR_RETURN(auto registry, metrics::StartMetrics(flags, "inference"));  // null: off
//   if (registry) { registry->SetRank(0); m = std::make_unique<inference::InferenceMetrics>(*registry); }
//   if (m) m->SetLoadedEpoch(epoch);  per request: if (m) m->RequestDone(s.code(), absl::Now() - t0);
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace dtrain::inference {

class InferenceMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object.
  explicit InferenceMetrics(metrics::MetricsRegistry& registry);

  // One request answered with `code` (label code="OK", "INVALID_ARGUMENT", ...: the
  // series of a code appears with its first request), `latency` after it arrived.
  void RequestDone(absl::StatusCode code, absl::Duration latency);
  void SetLoadedEpoch(int64_t epoch);
  // One forward pass of `images` images from `requests` requests (dynamic batching).
  void BatchRan(int requests, int64_t images);

 private:
  prometheus::Counter& RequestsFor(absl::StatusCode code);

  metrics::MetricsRegistry& registry_;
  static constexpr int kCodes = 17;  // absl::StatusCode 0..16
  std::array<std::atomic<prometheus::Counter*>, kCodes> requests_{};
  std::mutex create_mu_;  // creating a code's series
  prometheus::Histogram* latency_;
  prometheus::Gauge* loaded_epoch_;
  prometheus::Histogram* batch_images_;
};

}  // namespace dtrain::inference
