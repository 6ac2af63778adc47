#include "services/inference/open_inference_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"
#include "common/version.h"
#include "services/inference/open_inference_codec.h"

namespace dtrain::inference {
namespace {

constexpr char kServerName[] = "dtrain-infer";

}  // namespace

OpenInferenceService::OpenInferenceService(std::shared_ptr<ModelHolder> holder, OpenInferenceOptions options)
    : holder_(std::move(holder)), options_(std::move(options)) {}

grpc::Status OpenInferenceService::ServerLive(grpc::ServerContext* /*ctx*/,
                                              const ::inference::ServerLiveRequest* /*req*/,
                                              ::inference::ServerLiveResponse* resp) {
  resp->set_live(true);  // answering at all is being live
  return grpc::Status::OK;
}

grpc::Status OpenInferenceService::ServerReady(grpc::ServerContext* /*ctx*/,
                                               const ::inference::ServerReadyRequest* /*req*/,
                                               ::inference::ServerReadyResponse* resp) {
  resp->set_ready(holder_->Get() != nullptr);
  return grpc::Status::OK;
}

grpc::Status OpenInferenceService::ModelReady(grpc::ServerContext* ctx, const ::inference::ModelReadyRequest* req,
                                              ::inference::ModelReadyResponse* resp) {
  if (absl::Status auth = options_.auth.Check(*ctx); !auth.ok()) return ToGrpc(auth);
  std::shared_ptr<const LoadedModel> model = holder_->Get();
  // A version asked for before any is loaded is simply not ready yet.
  if (model == nullptr && req->name() == options_.model_name) {
    resp->set_ready(false);
    return grpc::Status::OK;
  }
  if (absl::Status s =
          CheckModelRef(req->name(), req->version(), options_.model_name, model == nullptr ? nullptr : &model->meta());
      !s.ok()) {
    return ToGrpc(s);
  }
  resp->set_ready(true);
  return grpc::Status::OK;
}

grpc::Status OpenInferenceService::ServerMetadata(grpc::ServerContext* ctx,
                                                  const ::inference::ServerMetadataRequest* /*req*/,
                                                  ::inference::ServerMetadataResponse* resp) {
  if (absl::Status auth = options_.auth.Check(*ctx); !auth.ok()) return ToGrpc(auth);
  resp->set_name(kServerName);
  // "dtrain-infer 0.1.0 (git abc1234)" without the program name.
  const std::string text = VersionText(kServerName);
  resp->set_version(text.substr(std::string(kServerName).size() + 1));
  return grpc::Status::OK;
}

grpc::Status OpenInferenceService::ModelMetadata(grpc::ServerContext* ctx, const ::inference::ModelMetadataRequest* req,
                                                 ::inference::ModelMetadataResponse* resp) {
  if (absl::Status auth = options_.auth.Check(*ctx); !auth.ok()) return ToGrpc(auth);
  CallCounter::Scope counted = options_.calls->Enter();
  std::shared_ptr<const LoadedModel> model = holder_->Get();
  if (absl::Status s =
          CheckModelRef(req->name(), req->version(), options_.model_name, model == nullptr ? nullptr : &model->meta());
      !s.ok()) {
    return ToGrpc(s);
  }
  if (model == nullptr) return ToGrpc(absl::UnavailableError(NotLoadedYet()));
  FillModelMetadata(options_.model_name, model->meta(), resp);
  return grpc::Status::OK;
}

grpc::Status OpenInferenceService::ModelInfer(grpc::ServerContext* ctx, const ::inference::ModelInferRequest* req,
                                              ::inference::ModelInferResponse* resp) {
  const absl::Time start = absl::Now();
  absl::Status status = options_.auth.Check(*ctx);
  if (status.ok()) status = Infer(*ctx, *req, resp);
  if (options_.metrics != nullptr) options_.metrics->RequestDone(status.code(), absl::Now() - start);
  return ToGrpc(status);
}

std::string OpenInferenceService::NotLoadedYet() const {
  return absl::StrCat("model '", options_.model_name, "' is not loaded yet: waiting for a checkpoint ",
                      WithoutDirectory(options_.prefix, DirectoryOf(options_.prefix)), "-NNNN.params");
}

absl::Status OpenInferenceService::Infer(grpc::ServerContext& ctx, const ::inference::ModelInferRequest& req,
                                         ::inference::ModelInferResponse* resp) {
  CallCounter::Scope counted = options_.calls->Enter();
  // This request keeps this model to the end, whatever a reload does meanwhile.
  std::shared_ptr<const LoadedModel> model = holder_->Get();
  if (absl::Status s = CheckModelRef(req.model_name(), req.model_version(), options_.model_name,
                                     model == nullptr ? nullptr : &model->meta());
      !s.ok()) {
    return s;
  }
  if (model == nullptr) return absl::UnavailableError(NotLoadedYet());
  std::string scratch;
  absl::StatusOr<OipInferInput> input = ParseInferRequest(req, model->meta(), options_.max_batch, &scratch);
  if (!input.ok()) return input.status();
  const absl::Time deadline = DeadlineOf(ctx);
  if (absl::Status s = StillWanted(ctx, deadline, "the forward pass"); !s.ok()) return s;
  absl::StatusOr<ClassOutputs> outputs = options_.forward->Run(model, input->images, deadline);
  if (!outputs.ok()) return outputs.status();
  FillInferResponse(req, options_.model_name, model->meta(), *input, *outputs, resp);
  return absl::OkStatus();
}

}  // namespace dtrain::inference
