#include "services/predict/inference_client.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"

namespace dtrain::predict {

InferenceClient::InferenceClient(const std::string& address, std::string bearer_token)
    : address_(address), bearer_token_(std::move(bearer_token)), stub_(v1::Inference::NewStub(MakeChannel(address))) {}

void InferenceClient::Prepare(grpc::ClientContext& ctx) const {
  if (!bearer_token_.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", bearer_token_));
}

absl::StatusOr<v1::ModelInfoResponse> InferenceClient::WaitForModel(absl::Duration wait) {
  const absl::Time give_up = absl::Now() + wait;
  for (;;) {
    grpc::ClientContext ctx;
    Prepare(ctx);
    // Short calls, so a server that is up but slow to load is asked again soon.
    const absl::Duration left = std::max(give_up - absl::Now(), absl::ZeroDuration());
    ctx.set_deadline(DeadlineAfter(std::clamp(left, absl::Seconds(1), absl::Seconds(5))));
    v1::ModelInfoResponse info;
    absl::Status s = FromGrpc(stub_->ModelInfo(&ctx, v1::ModelInfoRequest(), &info));
    if (s.ok()) return info;
    const bool not_ready = absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
    if (!not_ready || absl::Now() >= give_up) {
      return absl::Status(s.code(), absl::StrCat("inference server ", address_, ": ", s.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

absl::StatusOr<v1::PredictResponse> InferenceClient::Predict(const std::vector<uint8_t>& pixels, int64_t count,
                                                             const std::vector<int64_t>& image_shape, int top_k,
                                                             absl::Duration timeout) {
  v1::PredictRequest req;
  req.set_pixel_type(v1::PIXEL_TYPE_UINT8);
  req.add_shape(count);
  for (int64_t d : image_shape) req.add_shape(d);
  req.set_data(pixels.data(), pixels.size());
  req.set_top_k(top_k);
  grpc::ClientContext ctx;
  Prepare(ctx);
  ctx.set_deadline(DeadlineAfter(timeout));
  v1::PredictResponse resp;
  absl::Status s = FromGrpc(stub_->Predict(&ctx, req, &resp));
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("Predict at ", address_, ": ", s.message()));
  if (resp.predictions_size() != count) {
    return absl::InternalError(
        absl::StrCat("Predict at ", address_, ": ", resp.predictions_size(), " answers for ", count, " images"));
  }
  return resp;
}

}  // namespace dtrain::predict
