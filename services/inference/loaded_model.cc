#include "services/inference/loaded_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/checkpoint/checkpoint.h"
#include "common/models/model_state.h"
#include "common/models/models.h"

namespace dtrain::inference {

struct LoadedModel::Net {
  std::shared_ptr<models::Network> module;
};

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

// A checkpoint whose training diverged has a valid CRC and NaN weights; serving it would
// answer every image with NaN probabilities, so it is refused like a corrupt file.
absl::Status CheckFinite(const std::string& path, const std::vector<checkpoint::NamedTensor>& tensors) {
  for (const checkpoint::NamedTensor& t : tensors) {
    for (size_t i = 0; i < t.data.size(); ++i) {
      if (!std::isfinite(t.data[i])) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ": ", t.name, " element ", i, " is ", t.data[i], " (did training diverge?)"));
      }
    }
  }
  return absl::OkStatus();
}

// The parts' images, one after another, as the float tensor training used: uint8 pixels
// become x / 255 as in services/worker/dataset.cc (an exact conversion, then one
// correctly rounded float division per pixel), so results match the trainer's
// validation bit for bit whatever else shares the batch. Written as a plain loop
// rather than LibTorch's copy_ and div_ (the same arithmetic: IEEE division, no
// reciprocal, no fast-math here): two operator dispatches per request in a batch cost
// more than the conversion of a small image itself.
torch::Tensor ToTensor(const std::vector<const ImageBatchView*>& parts, const std::vector<int64_t>& image_shape) {
  int64_t total = 0;
  for (const ImageBatchView* p : parts) total += p->count;
  std::vector<int64_t> sizes = {total};
  sizes.insert(sizes.end(), image_shape.begin(), image_shape.end());
  torch::Tensor x = torch::empty(sizes, torch::kFloat32);
  float* out = x.data_ptr<float>();
  for (const ImageBatchView* p : parts) {
    if (p->type == PixelType::kUint8) {
      const auto* in = reinterpret_cast<const unsigned char*>(p->data.data());
      const size_t n = p->data.size();
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) / 255.0f;
      out += n;
    } else {
      // memcpy: protobuf's bytes carry no alignment promise for floats.
      std::memcpy(out, p->data.data(), p->data.size());
      out += p->data.size() / sizeof(float);
    }
  }
  return x;
}

}  // namespace

LoadedModel::LoadedModel(ModelMeta meta, std::unique_ptr<Net> net) : meta_(std::move(meta)), net_(std::move(net)) {}

LoadedModel::~LoadedModel() = default;

absl::StatusOr<std::shared_ptr<const LoadedModel>> LoadedModel::Load(const std::string& prefix, int epoch) {
  DTRAIN_ASSIGN_OR_RETURN(checkpoint::SymbolInfo symbol, checkpoint::ReadSymbol(prefix));
  const std::string path = checkpoint::ParamsPath(prefix, epoch);
  DTRAIN_ASSIGN_OR_RETURN(std::vector<checkpoint::NamedTensor> tensors, checkpoint::ReadParams(path));
  DTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<models::Network> module,
                          models::CreateNetwork(models::NetworkSpec{symbol.network, symbol.hidden, symbol.num_layers},
                                                symbol.num_classes, symbol.input_shape));
  // Weights and the float buffers (batch-norm statistics, input normalisation), as the
  // trainer saved them (models::CheckpointTensors).
  std::vector<checkpoint::NamedTensor> expected;
  for (const auto& [name, t] : models::CheckpointTensors(*module)) expected.push_back({name, t.sizes().vec(), {}});
  DTRAIN_RETURN_IF_ERROR(checkpoint::CheckParamsMatch(path, tensors, expected));
  DTRAIN_RETURN_IF_ERROR(CheckFinite(path, tensors));

  std::vector<int64_t> probe_shape = {1};
  probe_shape.insert(probe_shape.end(), symbol.input_shape.begin(), symbol.input_shape.end());
  try {
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& [name, t] : models::CheckpointTensors(*module)) {
      std::memcpy(t.data_ptr<float>(), tensors[i++].data.data(), sizeof(float) * t.numel());
    }
    module->eval();
    // One blank image: a symbol whose input shape the network cannot take is refused
    // now, not on the first request.
    c10::InferenceMode inference;
    torch::Tensor out = module->forward(torch::zeros(probe_shape));
    if (out.sizes().vec() != std::vector<int64_t>{1, symbol.num_classes}) {
      return absl::FailedPreconditionError(absl::StrCat(
          checkpoint::SymbolPath(prefix), ": the ", symbol.network, " network maps input ", ShapeText(probe_shape),
          " to ", ShapeText(out.sizes().vec()), ", not [1,", symbol.num_classes, "]"));
    }
  } catch (const c10::Error& e) {
    return absl::FailedPreconditionError(absl::StrCat(checkpoint::SymbolPath(prefix), ": the ", symbol.network,
                                                      " network cannot take input ", ShapeText(probe_shape), ": ",
                                                      e.what_without_backtrace()));
  }

  ModelMeta meta;
  meta.prefix = prefix;
  meta.network = symbol.network;
  meta.num_classes = symbol.num_classes;
  meta.class_names = symbol.class_names;
  if (meta.class_names.empty()) {
    for (int c = 0; c < symbol.num_classes; ++c) meta.class_names.push_back(std::to_string(c));
  }
  meta.input_shape = symbol.input_shape;
  meta.epoch = epoch;
  meta.params_path = path;
  meta.loaded_at = absl::Now();
  auto net = std::make_unique<Net>();
  net->module = std::move(module);
  return std::shared_ptr<const LoadedModel>(new LoadedModel(std::move(meta), std::move(net)));
}

absl::StatusOr<std::vector<ClassOutputs>> LoadedModel::Forward(const std::vector<const ImageBatchView*>& parts) const {
  for (const ImageBatchView* p : parts) {
    const int64_t pixels = p->count * [&] {
      int64_t n = PixelBytes(p->type);
      for (int64_t d : meta_.input_shape) n *= d;
      return n;
    }();
    if (p->image_shape != meta_.input_shape || p->count <= 0 || static_cast<int64_t>(p->data.size()) != pixels) {
      return absl::InternalError(absl::StrCat("Forward: batch of ", p->count, " images of ", ShapeText(p->image_shape),
                                              " for a model taking ", ShapeText(meta_.input_shape),
                                              " was not validated"));
    }
  }
  if (parts.empty()) return std::vector<ClassOutputs>();
  ClassOutputs all;
  all.num_classes = meta_.num_classes;
  try {
    // The module is shared by every request: inference mode keeps autograd from
    // recording anything, and forward() only reads the weights.
    c10::InferenceMode inference;
    // Forwards run on the server's threads, whose OpenMP thread count is the machine's
    // until set: OpenBLAS (libblas.so.3, deploy/install-deps.sh) follows it, and would
    // put every core behind each of the concurrent forwards. LibTorch's own count
    // (--intra-op-threads), once per thread.
    [[maybe_unused]] thread_local const bool threads_held = (at::init_num_threads(), true);
    torch::Tensor logits = net_->module->forward(ToTensor(parts, meta_.input_shape)).contiguous();
    torch::Tensor probs = torch::softmax(logits, 1).contiguous();
    all.images = logits.size(0);
    const float* l = logits.data_ptr<float>();
    const float* pr = probs.data_ptr<float>();
    all.logits.assign(l, l + logits.numel());
    all.probabilities.assign(pr, pr + probs.numel());
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("forward of ", meta_.network, " epoch ", meta_.epoch, " failed: ", e.what_without_backtrace()));
  }
  std::vector<ClassOutputs> out;
  out.reserve(parts.size());
  int64_t first = 0;
  for (const ImageBatchView* p : parts) {
    out.push_back(parts.size() == 1 ? std::move(all) : all.Rows(first, p->count));
    first += p->count;
  }
  return out;
}

absl::StatusOr<Predictions> LoadedModel::Predict(const ImageBatchView& images, int top_k) const {
  absl::StatusOr<std::vector<ClassOutputs>> out = Forward({&images});
  if (!out.ok()) return out.status();
  return TopClasses(out->front(), top_k);
}

}  // namespace dtrain::inference
