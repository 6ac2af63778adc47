#include "services/inference/inference_service.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"

namespace dtrain::inference {
namespace {

PixelType FromProto(v1::PixelType t) {
  switch (t) {
    case v1::PIXEL_TYPE_UINT8:
      return PixelType::kUint8;
    case v1::PIXEL_TYPE_FLOAT32:
      return PixelType::kFloat32;
    default:
      return PixelType::kUnspecified;
  }
}

absl::Time DeadlineOf(const grpc::ServerContext& ctx) {
  const auto deadline = ctx.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

// Counts a call as running for its whole scope.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>* count) : count_(count) { count_->fetch_add(1); }
  ~InFlight() { count_->fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>* count_;
};

// Checked before work that the caller may no longer want.
absl::Status StillWanted(grpc::ServerContext& ctx, absl::Time deadline, const char* before) {
  if (ctx.IsCancelled()) return absl::CancelledError(absl::StrCat("cancelled by the client before ", before));
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(absl::StrCat("deadline passed before ", before));
  }
  return absl::OkStatus();
}

// "a/b/model-0001.params" -> "a/b/" (with the slash; "" when there is none).
std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string WithoutDirectory(const std::string& path, const std::string& dir) {
  if (!dir.empty() && absl::StartsWith(path, dir)) return path.substr(dir.size());
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

InferenceService::InferenceService(std::shared_ptr<ModelHolder> holder,
                                   InferenceServiceOptions options)
    : holder_(std::move(holder)), options_(std::move(options)), slots_(options_.forward_slots) {}

bool InferenceService::Drain(absl::Duration timeout) const {
  const absl::Time give_up = absl::Now() + timeout;
  while (in_flight_.load() > 0) {
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

absl::StatusOr<std::shared_ptr<const LoadedModel>> InferenceService::Current() const {
  std::shared_ptr<const LoadedModel> model = holder_->Get();
  if (model == nullptr) {
    return absl::UnavailableError(absl::StrCat("no model loaded yet: waiting for a checkpoint ",
                                               WithoutDirectory(options_.prefix, DirectoryOf(options_.prefix)),
                                               "-NNNN.params"));
  }
  return model;
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
  InFlight counted(&in_flight_);
  // This request keeps this model to the end, whatever a reload does meanwhile.
  absl::StatusOr<std::shared_ptr<const LoadedModel>> model = Current();
  if (!model.ok()) return ToGrpc(model.status());
  const ModelMeta& meta = (*model)->meta();
  if (req->top_k() < 0) {
    return ToGrpc(absl::InvalidArgumentError(
        absl::StrCat("top_k is ", req->top_k(), "; want 0 (meaning 1) to ", meta.num_classes)));
  }
  absl::StatusOr<ImageBatchView> images =
      ValidateImages(FromProto(req->pixel_type()), {req->shape().begin(), req->shape().end()},
                     req->data(), meta.input_shape, options_.max_batch);
  if (!images.ok()) return ToGrpc(images.status());

  const absl::Time deadline = DeadlineOf(*ctx);
  if (absl::Status s = StillWanted(*ctx, deadline, "waiting for a slot"); !s.ok()) return ToGrpc(s);
  absl::StatusOr<ForwardSlots::Lease> slot = slots_.Acquire(deadline);
  if (!slot.ok()) return ToGrpc(slot.status());
  if (absl::Status s = StillWanted(*ctx, deadline, "the forward pass"); !s.ok()) return ToGrpc(s);
  absl::StatusOr<Predictions> predictions = (*model)->Predict(*images, req->top_k());
  if (!predictions.ok()) return ToGrpc(predictions.status());

  resp->set_epoch(meta.epoch);
  resp->mutable_predictions()->Reserve(static_cast<int>(predictions->size()));
  for (const auto& top : *predictions) {
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

grpc::Status InferenceService::ModelInfo(grpc::ServerContext* ctx,
                                         const v1::ModelInfoRequest* /*req*/,
                                         v1::ModelInfoResponse* resp) {
  if (absl::Status auth = options_.auth.Check(*ctx); !auth.ok()) return ToGrpc(auth);
  InFlight counted(&in_flight_);
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
