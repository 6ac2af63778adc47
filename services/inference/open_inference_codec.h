// The Open Inference Protocol (KServe v2, package `inference`) on our model: what the
// model is called, which tensors it takes and gives, and the translation of
// ModelInferRequest into checked images and of ClassOutputs into a ModelInferResponse.
//
// Protobuf but no gRPC, so every refusal is unit-testable. Nothing from the wire is
// trusted for a size or a count: shapes are checked against the model before any
// product is formed, and byte and element counts against the shape before any read.
//
// The model as the protocol shows it:
//   input  "images"        FP32 [-1, C, H, W] (the checkpoint's input shape; UINT8 0..255
//                          accepted too, and [-1, H, W] when C is 1, as dtrain.v1 does)
//   output "logits"        FP32 [-1, classes]  the network's output
//   output "probabilities" FP32 [-1, classes]  their softmax
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kserve/v2/grpc_predict_v2.pb.h"
#include "services/inference/class_outputs.h"
#include "services/inference/image_batch.h"
#include "services/inference/loaded_model.h"

namespace dtrain::inference {

inline constexpr char kOipInputName[] = "images";
inline constexpr char kOipLogitsName[] = "logits";
inline constexpr char kOipProbabilitiesName[] = "probabilities";
inline constexpr char kOipPlatform[] = "pytorch_libtorch";

// The model's version as the protocol names it: its checkpoint epoch ("3").
std::string OipVersion(const ModelMeta& meta);

// The name dtrain-infer serves a checkpoint prefix under by default: its file name
// part ("model/fmnist-lenet" -> "fmnist-lenet").
std::string DefaultModelName(const std::string& prefix);

// NOT_FOUND, naming what is served, unless `name` is `served_name` and `version` is
// empty or the serving epoch. `meta` null: no model loaded, so any version is unknown.
absl::Status CheckModelRef(const std::string& name, const std::string& version, const std::string& served_name,
                           const ModelMeta* meta);

void FillModelMetadata(const std::string& served_name, const ModelMeta& meta, ::inference::ModelMetadataResponse* resp);

enum class OipOutput { kLogits, kProbabilities };

// A ModelInferRequest, checked: its images and the outputs to answer, in order.
struct OipInferInput {
  ImageBatchView images;  // a view of the request's raw bytes, or of `scratch`
  std::vector<OipOutput> outputs;
  bool raw = false;  // the request used raw_input_contents: answer raw_output_contents
};

// Checks `req` (whose name and version the caller already checked) against `meta`:
// one input named "images", datatype FP32 or UINT8, shape [N, *input_shape] with
// 1 <= N <= max_batch, contents that are raw bytes or typed values (not both) of
// exactly the shape's size, UINT8 values <= 255, finite floats, known outputs named
// at most once. INVALID_ARGUMENT naming the field and what was expected otherwise.
// Typed contents are copied into *scratch, which must outlive the result.
absl::StatusOr<OipInferInput> ParseInferRequest(const ::inference::ModelInferRequest& req, const ModelMeta& meta,
                                                int64_t max_batch, std::string* scratch);

// The response for `input`'s outputs computed as `outputs`.
void FillInferResponse(const ::inference::ModelInferRequest& req, const std::string& served_name, const ModelMeta& meta,
                       const OipInferInput& input, const ClassOutputs& outputs, ::inference::ModelInferResponse* resp);

}  // namespace dtrain::inference
