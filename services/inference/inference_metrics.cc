#include "services/inference/inference_metrics.h"

#include <prometheus/histogram.h>

#include "common/metrics/families.h"

namespace dtrain::inference {

namespace {
constexpr char kRequests[] = "dtrain_inference_requests_total";
constexpr char kRequestsHelp[] = "Inference requests answered, by result code (gRPC's code names).";
}  // namespace

InferenceMetrics::InferenceMetrics(metrics::MetricsRegistry& registry) : registry_(registry) {
  prometheus::Registry& r = registry.families();
  latency_ = &metrics::internal::AddHistogram(r, "dtrain_inference_request_duration_seconds",
                                              "Seconds from a request's arrival to its answer.",
                                              metrics::internal::SecondsBuckets());
  loaded_epoch_ = &metrics::internal::AddGauge(
      r, "dtrain_inference_loaded_epoch", "Epoch of the checkpoint being served (PREFIX-NNNN.params); -1: none yet.");
  loaded_epoch_->Set(-1);
  // Powers of two up to 1024 (--max-batch's default): how full dynamic batching gets.
  batch_images_ = &metrics::internal::AddHistogram(
      r, "dtrain_inference_batch_images", "Images per forward pass (dynamic batching joins requests' images).",
      prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024});
}

prometheus::Counter& InferenceMetrics::RequestsFor(absl::StatusCode code) {
  int index = static_cast<int>(code);
  if (index < 0 || index >= kCodes) index = static_cast<int>(absl::StatusCode::kUnknown);
  prometheus::Counter* counter = requests_[index].load(std::memory_order_acquire);
  if (counter != nullptr) return *counter;
  std::lock_guard<std::mutex> lock(create_mu_);
  counter = requests_[index].load(std::memory_order_relaxed);
  if (counter == nullptr) {
    counter =
        &metrics::internal::AddCounter(registry_.families(), kRequests, kRequestsHelp,
                                       {{"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(index))}});
    requests_[index].store(counter, std::memory_order_release);
  }
  return *counter;
}

void InferenceMetrics::RequestDone(absl::StatusCode code, absl::Duration latency) {
  RequestsFor(code).Increment();
  latency_->Observe(absl::ToDoubleSeconds(latency));
}

void InferenceMetrics::BatchRan(int /*requests*/, int64_t images) {
  batch_images_->Observe(static_cast<double>(images));
}

void InferenceMetrics::SetLoadedEpoch(int64_t epoch) { loaded_epoch_->Set(static_cast<double>(epoch)); }

}  // namespace dtrain::inference
