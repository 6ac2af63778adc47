// The Inference gRPC service: translates Predict / ModelInfo into calls on the
// ModelHolder's current model, with ValidateImages in front.
//
// The sync API on purpose: a Predict is CPU-bound work of milliseconds, which must not
// run on the callback API's event-engine threads; the sync server gives each call a
// thread and ForwardSlots bounds how many forwards run at once.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "services/inference/inference_metrics.h"
#include "dtrain/v1/inference.grpc.pb.h"
#include "services/inference/call_auth.h"
#include "services/inference/forward_slots.h"
#include "services/inference/model_holder.h"

namespace dtrain::inference {

struct InferenceServiceOptions {
  std::string prefix;       // reported while no model is loaded
  int64_t max_batch = 1024;
  int forward_slots = 1;  // forwards running at once
  inference::InferenceMetrics* metrics = nullptr;  // null: metrics off
  CallAuth auth;  // who may call Predict and ModelInfo (default: anyone)
};

class InferenceService final : public v1::Inference::Service {
 public:
  InferenceService(std::shared_ptr<ModelHolder> holder, InferenceServiceOptions options);

  // Counts the request's outcome and latency (when metrics are on) around Serve.
  grpc::Status Predict(grpc::ServerContext* ctx, const v1::PredictRequest* req,
                       v1::PredictResponse* resp) override;
  grpc::Status ModelInfo(grpc::ServerContext* ctx, const v1::ModelInfoRequest* req,
                         v1::ModelInfoResponse* resp) override;

  // Waits up to `timeout` for the calls now running to finish; false if some still
  // run. grpc::Server::Shutdown(deadline) also waits for idle client connections to
  // go away, so main drains with this first and then shuts down without a grace period.
  bool Drain(absl::Duration timeout) const;

 private:
  grpc::Status Serve(grpc::ServerContext* ctx, const v1::PredictRequest* req, v1::PredictResponse* resp);
  // The serving model, or UNAVAILABLE (retry later) before the first load.
  absl::StatusOr<std::shared_ptr<const LoadedModel>> Current() const;

  std::shared_ptr<ModelHolder> holder_;
  const InferenceServiceOptions options_;
  ForwardSlots slots_;
  mutable std::atomic<int> in_flight_{0};
};

}  // namespace dtrain::inference
