// The Inference gRPC service: translates Predict / ModelInfo into calls on the
// ModelHolder's current model, with ValidateImages in front.
//
// The sync API on purpose: a Predict is CPU-bound work of milliseconds, which must not
// run on the callback API's event-engine threads; the sync server gives each call a
// thread, which waits while BatchedForward runs its images (batched with other calls',
// of either protocol) on a bounded number of runner threads.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "services/inference/inference_metrics.h"
#include "dtrain/v1/inference.grpc.pb.h"
#include "services/inference/call_auth.h"
#include "services/inference/batched_forward.h"
#include "services/inference/model_holder.h"
#include "services/inference/rpc_context.h"

namespace dtrain::inference {

struct InferenceServiceOptions {
  std::string prefix;  // reported while no model is loaded
  int64_t max_batch = 1024;
  BatchedForward* forward = nullptr;               // shared with the other protocol; outlives the service
  CallCounter* calls = nullptr;                    // calls running, for the drain at shutdown; outlives the service
  inference::InferenceMetrics* metrics = nullptr;  // null: metrics off
  CallAuth auth;                                   // who may call Predict and ModelInfo (default: anyone)
};

class InferenceService final : public v1::Inference::Service {
 public:
  InferenceService(std::shared_ptr<ModelHolder> holder, InferenceServiceOptions options);

  // Counts the request's outcome and latency (when metrics are on) around Serve.
  grpc::Status Predict(grpc::ServerContext* ctx, const v1::PredictRequest* req, v1::PredictResponse* resp) override;
  grpc::Status ModelInfo(grpc::ServerContext* ctx, const v1::ModelInfoRequest* req,
                         v1::ModelInfoResponse* resp) override;

 private:
  grpc::Status Serve(grpc::ServerContext* ctx, const v1::PredictRequest* req, v1::PredictResponse* resp);
  // The serving model, or UNAVAILABLE (retry later) before the first load.
  absl::StatusOr<std::shared_ptr<const LoadedModel>> Current() const;

  std::shared_ptr<ModelHolder> holder_;
  const InferenceServiceOptions options_;
};

}  // namespace dtrain::inference
