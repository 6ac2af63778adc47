// The one way both protocols run a model: a request's validated images go through the
// DynamicBatcher, which runs them with other requests' images on the same LoadedModel
// in one forward pass and hands each caller its own rows.
//
// dtrain.v1.Inference/Predict and inference.GRPCInferenceService/ModelInfer both call
// Run, so they share the queue, the runners and the model a reload swapped in.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/inference/batcher.h"
#include "services/inference/class_outputs.h"
#include "services/inference/loaded_model.h"

namespace dtrain::inference {

class BatchedForward {
 public:
  // `observer` (may be null) is told of every batch (metrics).
  explicit BatchedForward(BatcherOptions options, DynamicBatcher::BatchObserver observer = nullptr);

  // The logits and probabilities of `images`, which ValidateImages checked against
  // `model`'s input shape and which outlive the call. The request batches only with
  // others on the same `model`. DEADLINE_EXCEEDED if `deadline` passes while it is
  // queued; UNAVAILABLE while stopping; INTERNAL if the forward fails.
  absl::StatusOr<ClassOutputs> Run(std::shared_ptr<const LoadedModel> model, const ImageBatchView& images,
                                   absl::Time deadline);

  // Queued and later requests get UNAVAILABLE; running batches finish.
  void Stop() { batcher_.Stop(); }

  const BatcherOptions& options() const { return batcher_.options(); }

 private:
  DynamicBatcher batcher_;
};

}  // namespace dtrain::inference
