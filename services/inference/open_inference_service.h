// The Open Inference Protocol's gRPC service (KServe v2, inference.GRPCInferenceService)
// over the same model, batcher and hot reload as dtrain.v1.Inference: translates each
// RPC with open_inference_codec and runs ModelInfer through the shared BatchedForward.
//
// ServerLive and ServerReady stay open, as the health service does (probes); the model
// calls (ModelReady, ServerMetadata, ModelMetadata, ModelInfer) pass CallAuth first.
// Sync API for the reason given in inference_service.h.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "kserve/v2/grpc_predict_v2.grpc.pb.h"
#include "services/inference/batched_forward.h"
#include "services/inference/call_auth.h"
#include "services/inference/inference_metrics.h"
#include "services/inference/model_holder.h"
#include "services/inference/rpc_context.h"

namespace dtrain::inference {

struct OpenInferenceOptions {
  std::string prefix;      // named while no model is loaded
  std::string model_name;  // the name clients ask for (--model-name)
  int64_t max_batch = 1024;
  BatchedForward* forward = nullptr;    // shared with dtrain.v1.Inference; outlives the service
  CallCounter* calls = nullptr;         // shared; outlives the service
  InferenceMetrics* metrics = nullptr;  // null: metrics off
  CallAuth auth;
};

class OpenInferenceService final : public ::inference::GRPCInferenceService::Service {
 public:
  OpenInferenceService(std::shared_ptr<ModelHolder> holder, OpenInferenceOptions options);

  grpc::Status ServerLive(grpc::ServerContext* ctx, const ::inference::ServerLiveRequest* req,
                          ::inference::ServerLiveResponse* resp) override;
  grpc::Status ServerReady(grpc::ServerContext* ctx, const ::inference::ServerReadyRequest* req,
                           ::inference::ServerReadyResponse* resp) override;
  grpc::Status ModelReady(grpc::ServerContext* ctx, const ::inference::ModelReadyRequest* req,
                          ::inference::ModelReadyResponse* resp) override;
  grpc::Status ServerMetadata(grpc::ServerContext* ctx, const ::inference::ServerMetadataRequest* req,
                              ::inference::ServerMetadataResponse* resp) override;
  grpc::Status ModelMetadata(grpc::ServerContext* ctx, const ::inference::ModelMetadataRequest* req,
                             ::inference::ModelMetadataResponse* resp) override;
  // Counts the outcome and latency (when metrics are on) around Infer, as Predict does.
  grpc::Status ModelInfer(grpc::ServerContext* ctx, const ::inference::ModelInferRequest* req,
                          ::inference::ModelInferResponse* resp) override;

 private:
  absl::Status Infer(grpc::ServerContext& ctx, const ::inference::ModelInferRequest& req,
                     ::inference::ModelInferResponse* resp);
  // UNAVAILABLE's message before the first model: retry later.
  std::string NotLoadedYet() const;

  std::shared_ptr<ModelHolder> holder_;
  const OpenInferenceOptions options_;
};

}  // namespace dtrain::inference
