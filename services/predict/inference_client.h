// A client of dtrain-infer's Inference service: every call has a deadline, and the
// start-up wait retries only what "not ready yet" means (UNAVAILABLE).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dtrain/v1/inference.grpc.pb.h"

namespace dtrain::predict {

class InferenceClient {
 public:
  // `bearer_token`: sent as "authorization: Bearer TOKEN" on every call (empty: none;
  // a client certificate, if the process has one, goes in the TLS handshake).
  explicit InferenceClient(const std::string& address, std::string bearer_token = "");

  // ModelInfo, retried while the server is unreachable or has no model, until `wait`
  // has passed; then the last error, naming the address.
  absl::StatusOr<v1::ModelInfoResponse> WaitForModel(absl::Duration wait);

  // One Predict of `count` uint8 images of `image_shape` ([H, W] or [C, H, W]) packed
  // in `pixels`.
  absl::StatusOr<v1::PredictResponse> Predict(const std::vector<uint8_t>& pixels, int64_t count,
                                              const std::vector<int64_t>& image_shape, int top_k,
                                              absl::Duration timeout);

 private:
  // Fresh per call: a ClientContext is single-use.
  void Prepare(grpc::ClientContext& ctx) const;

  std::string address_;
  std::string bearer_token_;
  std::unique_ptr<v1::Inference::Stub> stub_;
};

}  // namespace dtrain::predict
