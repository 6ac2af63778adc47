#include "services/inference/open_inference_codec.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain::inference {
namespace {

using ::inference::InferTensorContents;
using ::inference::ModelInferRequest;
using ::inference::ModelInferResponse;
using ::inference::ModelMetadataResponse;

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

// "FP32 [-1,1,28,28]": the input as ModelMetadata describes it.
std::string InputText(const ModelMeta& meta) {
  std::vector<int64_t> shape = {-1};
  shape.insert(shape.end(), meta.input_shape.begin(), meta.input_shape.end());
  return absl::StrCat("'", kOipInputName, "' FP32 ", ShapeText(shape));
}

const char* OutputName(OipOutput o) { return o == OipOutput::kLogits ? kOipLogitsName : kOipProbabilitiesName; }

// How many values any typed field of `c` holds: a request may put values only in the
// field of its datatype.
int TypedValues(const InferTensorContents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() + c.uint_contents_size() +
         c.uint64_contents_size() + c.fp32_contents_size() + c.fp64_contents_size() + c.bytes_contents_size();
}

// The batch size of `shape` when its other dimensions are the model's input shape (or
// that without a leading 1); checks dimensions before anything is multiplied.
absl::StatusOr<int64_t> BatchOf(const google::protobuf::RepeatedField<int64_t>& wire_shape, const ModelMeta& meta,
                                int64_t max_batch) {
  const std::vector<int64_t> shape(wire_shape.begin(), wire_shape.end());
  const std::vector<int64_t>& in = meta.input_shape;
  const bool channel_dropped = in.size() == 3 && in[0] == 1 && shape.size() == in.size();
  std::vector<int64_t> want = in;
  if (channel_dropped) want.erase(want.begin());
  if (shape.size() != want.size() + 1 || !std::equal(want.begin(), want.end(), shape.begin() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", kOipInputName, "' has shape ", ShapeText(shape),
                                                   "; the model takes ", InputText(meta), " (N images)"));
  }
  const int64_t n = shape[0];
  if (n < 1) {
    return absl::InvalidArgumentError(absl::StrCat("input '", kOipInputName, "' has shape ", ShapeText(shape),
                                                   ": the batch dimension must be at least 1"));
  }
  if (n > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", kOipInputName, "' holds ", n, " images, over the limit of ", max_batch, " (--max-batch); split it"));
  }
  return n;
}

absl::StatusOr<std::vector<OipOutput>> RequestedOutputs(const ModelInferRequest& req) {
  std::vector<OipOutput> outputs;
  if (req.outputs_size() == 0) return std::vector<OipOutput>{OipOutput::kLogits, OipOutput::kProbabilities};
  for (const ModelInferRequest::InferRequestedOutputTensor& o : req.outputs()) {
    OipOutput which;
    if (o.name() == kOipLogitsName) {
      which = OipOutput::kLogits;
    } else if (o.name() == kOipProbabilitiesName) {
      which = OipOutput::kProbabilities;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown output '", o.name(), "': the model has '", kOipLogitsName,
                                                     "' and '", kOipProbabilitiesName, "'"));
    }
    if (std::find(outputs.begin(), outputs.end(), which) != outputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("output '", o.name(), "' is requested twice"));
    }
    // Triton's classification extension would change the output's type; not offered.
    if (o.parameters().count("classification") > 0) {
      return absl::InvalidArgumentError(absl::StrCat("output '", o.name(),
                                                     "': the classification parameter is not supported; request '",
                                                     kOipProbabilitiesName, "' and take the largest"));
    }
    outputs.push_back(which);
  }
  return outputs;
}

// The request's one input tensor, by the name the model gives it.
absl::StatusOr<const ModelInferRequest::InferInputTensor*> TheInput(const ModelInferRequest& req,
                                                                    const ModelMeta& meta) {
  if (req.inputs_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request has ", req.inputs_size(), " input tensors; the model takes one: ", InputText(meta)));
  }
  const ModelInferRequest::InferInputTensor& input = req.inputs(0);
  if (input.name() != kOipInputName) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown input '", input.name(), "': the model takes ", InputText(meta)));
  }
  return &input;
}

absl::StatusOr<PixelType> PixelTypeOf(const ModelInferRequest::InferInputTensor& input) {
  if (input.datatype() == "FP32") return PixelType::kFloat32;
  if (input.datatype() == "UINT8") return PixelType::kUint8;
  return absl::InvalidArgumentError(absl::StrCat("input '", kOipInputName, "' has datatype '", input.datatype(),
                                                 "'; the model takes FP32 (scaled to [0,1]) or UINT8 (0..255)"));
}

// What the input's pixels must add up to, from its checked shape.
struct InputSize {
  PixelType type;
  std::vector<int64_t> shape;
  int64_t elements;
  int64_t bytes;
};

// The pixels as sent in raw_input_contents[0] (a view into `req`).
absl::StatusOr<std::string_view> RawPixels(const ModelInferRequest& req,
                                           const ModelInferRequest::InferInputTensor& input, const InputSize& size) {
  if (req.raw_input_contents_size() != req.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("raw_input_contents has ", req.raw_input_contents_size(),
                                                   " entries for ", req.inputs_size(), " input(s): one per input"));
  }
  if (TypedValues(input.contents()) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", kOipInputName, "' has both contents and raw_input_contents: send one of them"));
  }
  const std::string& raw = req.raw_input_contents(0);
  if (static_cast<int64_t>(raw.size()) != size.bytes) {
    return absl::InvalidArgumentError(absl::StrCat("raw_input_contents[0] has ", raw.size(), " bytes; input '",
                                                   kOipInputName, "' ", input.datatype(), " ", ShapeText(size.shape),
                                                   " needs ", size.bytes));
  }
  return std::string_view(raw);
}

// The pixels of contents.fp32_contents, copied into `scratch`.
absl::StatusOr<std::string_view> Fp32Pixels(const ModelInferRequest::InferInputTensor& input, const InputSize& size,
                                            std::string* scratch) {
  const auto& values = input.contents().fp32_contents();
  if (values.size() != size.elements || TypedValues(input.contents()) != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", kOipInputName, "' FP32 ", ShapeText(size.shape), " needs ", size.elements,
                     " values in contents.fp32_contents (or raw_input_contents); it has ", values.size(), " there and ",
                     TypedValues(input.contents()) - values.size(), " in other fields"));
  }
  scratch->resize(static_cast<size_t>(size.bytes));
  std::memcpy(scratch->data(), values.data(), static_cast<size_t>(size.bytes));
  return std::string_view(*scratch);
}

// The pixels of contents.uint_contents, each checked to fit a byte, into `scratch`.
absl::StatusOr<std::string_view> Uint8Pixels(const ModelInferRequest::InferInputTensor& input, const InputSize& size,
                                             std::string* scratch) {
  const auto& values = input.contents().uint_contents();
  if (values.size() != size.elements || TypedValues(input.contents()) != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", kOipInputName, "' UINT8 ", ShapeText(size.shape), " needs ", size.elements,
                     " values in contents.uint_contents (or raw_input_contents); it has ", values.size(), " there and ",
                     TypedValues(input.contents()) - values.size(), " in other fields"));
  }
  scratch->resize(static_cast<size_t>(size.bytes));
  for (int i = 0; i < values.size(); ++i) {
    if (values[i] > 255) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", kOipInputName, "' UINT8 value ", i, " is ", values[i], ", over 255"));
    }
    (*scratch)[static_cast<size_t>(i)] = static_cast<char>(values[i]);
  }
  return std::string_view(*scratch);
}

}  // namespace

std::string OipVersion(const ModelMeta& meta) { return std::to_string(meta.epoch); }

std::string DefaultModelName(const std::string& prefix) {
  const size_t slash = prefix.rfind('/');
  return slash == std::string::npos ? prefix : prefix.substr(slash + 1);
}

absl::Status CheckModelRef(const std::string& name, const std::string& version, const std::string& served_name,
                           const ModelMeta* meta) {
  if (name != served_name) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "': this server serves '", served_name, "'"));
  }
  if (version.empty()) return absl::OkStatus();
  if (meta == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("model '", name, "' version ", version, " is not loaded: no version is loaded yet"));
  }
  if (version != OipVersion(*meta)) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' version '", version,
                                            "' is not loaded: the serving version is ", OipVersion(*meta),
                                            " (the checkpoint epoch; leave the version empty for the newest)"));
  }
  return absl::OkStatus();
}

void FillModelMetadata(const std::string& served_name, const ModelMeta& meta, ModelMetadataResponse* resp) {
  resp->set_name(served_name);
  resp->add_versions(OipVersion(meta));
  resp->set_platform(kOipPlatform);
  ModelMetadataResponse::TensorMetadata* in = resp->add_inputs();
  in->set_name(kOipInputName);
  in->set_datatype("FP32");
  in->add_shape(-1);
  for (int64_t d : meta.input_shape) in->add_shape(d);
  for (const char* name : {kOipLogitsName, kOipProbabilitiesName}) {
    ModelMetadataResponse::TensorMetadata* out = resp->add_outputs();
    out->set_name(name);
    out->set_datatype("FP32");
    out->add_shape(-1);
    out->add_shape(meta.num_classes);
  }
}

absl::StatusOr<OipInferInput> ParseInferRequest(const ModelInferRequest& req, const ModelMeta& meta, int64_t max_batch,
                                                std::string* scratch) {
  absl::StatusOr<const ModelInferRequest::InferInputTensor*> found = TheInput(req, meta);
  if (!found.ok()) return found.status();
  const ModelInferRequest::InferInputTensor& input = **found;
  absl::StatusOr<PixelType> type = PixelTypeOf(input);
  if (!type.ok()) return type.status();
  absl::StatusOr<int64_t> n = BatchOf(input.shape(), meta, max_batch);
  if (!n.ok()) return n.status();
  // n <= max_batch and the model's shape is small: no overflow.
  InputSize size{*type, std::vector<int64_t>(input.shape().begin(), input.shape().end()), *n, 0};
  for (int64_t d : meta.input_shape) size.elements *= d;
  size.bytes = size.elements * PixelBytes(*type);

  OipInferInput parsed;
  parsed.raw = req.raw_input_contents_size() > 0;
  absl::StatusOr<std::string_view> data;
  if (parsed.raw) {
    data = RawPixels(req, input, size);
  } else if (*type == PixelType::kFloat32) {
    data = Fp32Pixels(input, size, scratch);
  } else {
    data = Uint8Pixels(input, size, scratch);
  }
  if (!data.ok()) return data.status();
  // The shape and size hold by now; this adds the finite-pixel check and the view.
  absl::StatusOr<ImageBatchView> images = ValidateImages(*type, size.shape, *data, meta.input_shape, max_batch);
  if (!images.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", kOipInputName, "': ", images.status().message()));
  }
  parsed.images = *images;
  absl::StatusOr<std::vector<OipOutput>> outputs = RequestedOutputs(req);
  if (!outputs.ok()) return outputs.status();
  parsed.outputs = *std::move(outputs);
  return parsed;
}

void FillInferResponse(const ModelInferRequest& req, const std::string& served_name, const ModelMeta& meta,
                       const OipInferInput& input, const ClassOutputs& outputs, ModelInferResponse* resp) {
  resp->set_model_name(served_name);
  resp->set_model_version(OipVersion(meta));
  resp->set_id(req.id());
  for (OipOutput which : input.outputs) {
    const std::vector<float>& values = which == OipOutput::kLogits ? outputs.logits : outputs.probabilities;
    ModelInferResponse::InferOutputTensor* out = resp->add_outputs();
    out->set_name(OutputName(which));
    out->set_datatype("FP32");
    out->add_shape(outputs.images);
    out->add_shape(outputs.num_classes);
    if (input.raw) {
      resp->add_raw_output_contents(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    } else {
      out->mutable_contents()->mutable_fp32_contents()->Add(values.begin(), values.end());
    }
  }
}

}  // namespace dtrain::inference
