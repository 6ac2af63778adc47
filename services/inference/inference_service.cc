#include "services/inference/inference_service.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"
#include "services/inference/rpc_context.h"

namespace dtrain::inference {
namespace {

PixelType FromProto(v1::PixelType t) {
  switch (t) {
    case v1::PIXEL_TYPE_UINT8: return PixelType::kUint8;
    case v1::PIXEL_TYPE_FLOAT32: return PixelType::kFloat32;
    default: return PixelType::kUnspecified;
  }
}

}  // namespace

InferenceService::InferenceService(std::shared_ptr<ModelHolder> holder, InferenceServiceOptions options)
    : holder_(std::move(holder)), options_(std::move(options)) {}

absl::StatusOr<std::shared_ptr<const LoadedModel>> InferenceService::Current() const {
  return ServingModel(*holder_, options_.prefix);
}

grpc::Status InferenceService::Predict(grpc::ServerContext* ctx, const v1::PredictRequest* req,
                                       v1::PredictResponse* resp) {
  const absl::Time start = absl::Now();
  absl::Status auth = options_.auth.Check(*ctx);
  grpc::Status status = auth.ok() ? Serve(ctx, req, resp) : ToGrpc(auth);
  if (options_.metrics != nullptr) {
    options_.metrics->RequestDone(static_cast<absl::StatusCode>(status.error_code()), absl::Now() - start);
  }
  return status;
}

grpc::Status InferenceService::Serve(grpc::ServerContext* ctx, const v1::PredictRequest* req,
                                     v1::PredictResponse* resp) {
  CallCounter::Scope counted = options_.calls->Enter();
  // This request keeps this model to the end, whatever a reload does meanwhile.
  absl::StatusOr<std::shared_ptr<const LoadedModel>> model = Current();
  if (!model.ok()) return ToGrpc(model.status());
  const ModelMeta& meta = (*model)->meta();
  if (req->top_k() < 0) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("top_k is ", req->top_k(), "; want 0 (meaning 1) to ", meta.num_classes)));
  }
  absl::StatusOr<ImageBatchView> images =
      ValidateImages(FromProto(req->pixel_type()), {req->shape().begin(), req->shape().end()}, req->data(),
                     meta.input_shape, options_.max_batch);
  if (!images.ok()) return ToGrpc(images.status());

  const absl::Time deadline = DeadlineOf(*ctx);
  if (absl::Status s = StillWanted(*ctx, deadline, "the forward pass"); !s.ok()) return ToGrpc(s);
  absl::StatusOr<ClassOutputs> outputs = options_.forward->Run(*model, *images, deadline);
  if (!outputs.ok()) return ToGrpc(outputs.status());
  const Predictions predictions = TopClasses(*outputs, req->top_k());

  resp->set_epoch(meta.epoch);
  resp->mutable_predictions()->Reserve(static_cast<int>(predictions.size()));
  for (const auto& top : predictions) {
    v1::Prediction* p = resp->add_predictions();
    for (const ClassScore& c : top) {
      v1::ClassScore* score = p->add_top();
      score->set_class_id(c.class_id);
      score->set_name(meta.class_names[static_cast<size_t>(c.class_id)]);
      score->set_probability(c.probability);
    }
  }
  return grpc::Status::OK;
}

grpc::Status InferenceService::ModelInfo(grpc::ServerContext* ctx, const v1::ModelInfoRequest* /*req*/,
                                         v1::ModelInfoResponse* resp) {
  if (absl::Status auth = options_.auth.Check(*ctx); !auth.ok()) return ToGrpc(auth);
  CallCounter::Scope counted = options_.calls->Enter();
  absl::StatusOr<std::shared_ptr<const LoadedModel>> model = Current();
  if (!model.ok()) return ToGrpc(model.status());
  const ModelMeta& meta = (*model)->meta();
  resp->set_network(meta.network);
  resp->set_num_classes(meta.num_classes);
  for (const std::string& name : meta.class_names) resp->add_class_names(name);
  for (int64_t d : meta.input_shape) resp->add_input_shape(d);
  resp->set_epoch(meta.epoch);
  // File names, not the server's paths: a caller learns nothing of its file system.
  const std::string dir = DirectoryOf(meta.prefix);
  resp->set_params_path(WithoutDirectory(meta.params_path, dir));
  resp->set_loaded_unix_ms(absl::ToUnixMillis(meta.loaded_at));
  resp->set_max_batch(static_cast<int32_t>(options_.max_batch));
  resp->set_model_prefix(WithoutDirectory(meta.prefix, dir));
  resp->set_reload_error(dir.empty() ? holder_->reload_error()
                                     : absl::StrReplaceAll(holder_->reload_error(), {{dir, ""}}));
  return grpc::Status::OK;
}

}  // namespace dtrain::inference
