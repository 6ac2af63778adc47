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
#include "common/models/models.h"

namespace dtrain::inference {

struct LoadedModel::Net {
  std::shared_ptr<models::Network> module;
};

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// A checkpoint whose training diverged has a valid CRC and NaN weights; serving it would
// answer every image with NaN probabilities, so it is refused like a corrupt file.
absl::Status CheckFinite(const std::string& path, const std::vector<checkpoint::NamedTensor>& tensors) {
  for (const checkpoint::NamedTensor& t : tensors) {
    for (size_t i = 0; i < t.data.size(); ++i) {
      if (!std::isfinite(t.data[i])) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, ": ", t.name, " element ", i, " is ", t.data[i],
                         " (did training diverge?)"));
      }
    }
  }
  return absl::OkStatus();
}

// The images as the float tensor training used: uint8 pixels become x / 255 through the
// same LibTorch ops as services/worker/dataset.cc, so results match the trainer's
// validation bit for bit.
torch::Tensor ToTensor(const ImageBatchView& images) {
  std::vector<int64_t> sizes = {images.count};
  sizes.insert(sizes.end(), images.image_shape.begin(), images.image_shape.end());
  if (images.type == PixelType::kUint8) {
    auto pixels = torch::from_blob(const_cast<char*>(images.data.data()), sizes, torch::kUInt8);
    return pixels.to(torch::kFloat32).div_(255.0f);
  }
  torch::Tensor x = torch::empty(sizes, torch::kFloat32);
  std::memcpy(x.data_ptr<float>(), images.data.data(), images.data.size());
  return x;
}

}  // namespace

LoadedModel::LoadedModel(ModelMeta meta, std::unique_ptr<Net> net)
    : meta_(std::move(meta)), net_(std::move(net)) {}

LoadedModel::~LoadedModel() = default;

absl::StatusOr<std::shared_ptr<const LoadedModel>> LoadedModel::Load(const std::string& prefix,
                                                                     int epoch) {
  DTRAIN_ASSIGN_OR_RETURN(checkpoint::SymbolInfo symbol, checkpoint::ReadSymbol(prefix));
  const std::string path = checkpoint::ParamsPath(prefix, epoch);
  DTRAIN_ASSIGN_OR_RETURN(std::vector<checkpoint::NamedTensor> tensors, checkpoint::ReadParams(path));
  DTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<models::Network> module,
                          models::CreateNetwork(models::NetworkSpec{symbol.network, symbol.hidden},
                                                symbol.num_classes));
  std::vector<checkpoint::NamedTensor> expected;
  for (const auto& p : module->named_parameters()) {
    expected.push_back({p.key(), p.value().sizes().vec(), {}});
  }
  DTRAIN_RETURN_IF_ERROR(checkpoint::CheckParamsMatch(path, tensors, expected));
  DTRAIN_RETURN_IF_ERROR(CheckFinite(path, tensors));

  std::vector<int64_t> probe_shape = {1};
  probe_shape.insert(probe_shape.end(), symbol.input_shape.begin(), symbol.input_shape.end());
  try {
    torch::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& p : module->parameters()) {
      std::memcpy(p.data_ptr<float>(), tensors[i++].data.data(), sizeof(float) * p.numel());
    }
    module->eval();
    // One blank image: a symbol whose input shape the network cannot take is refused
    // now, not on the first request.
    c10::InferenceMode inference;
    torch::Tensor out = module->forward(torch::zeros(probe_shape));
    if (out.sizes().vec() != std::vector<int64_t>{1, symbol.num_classes}) {
      return absl::FailedPreconditionError(absl::StrCat(
          checkpoint::SymbolPath(prefix), ": the ", symbol.network, " network maps input ",
          ShapeText(probe_shape), " to ", ShapeText(out.sizes().vec()), ", not [1,",
          symbol.num_classes, "]"));
    }
  } catch (const c10::Error& e) {
    return absl::FailedPreconditionError(
        absl::StrCat(checkpoint::SymbolPath(prefix), ": the ", symbol.network,
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

absl::StatusOr<Predictions> LoadedModel::Predict(const ImageBatchView& images, int top_k) const {
  if (images.image_shape != meta_.input_shape || images.count <= 0) {
    return absl::InternalError(absl::StrCat("Predict: batch of ", images.count, " images of ",
                                            ShapeText(images.image_shape), " for a model taking ",
                                            ShapeText(meta_.input_shape), " was not validated"));
  }
  const int k = std::max(1, std::min(top_k, meta_.num_classes));
  Predictions out(static_cast<size_t>(images.count));
  try {
    // The module is shared by every request: inference mode keeps autograd from
    // recording anything, and forward() only reads the weights.
    c10::InferenceMode inference;
    torch::Tensor probs = torch::softmax(net_->module->forward(ToTensor(images)), 1);
    auto [values, indices] = probs.topk(k, /*dim=*/1);
    values = values.contiguous();
    indices = indices.contiguous();
    const float* v = values.data_ptr<float>();
    const int64_t* idx = indices.data_ptr<int64_t>();
    for (int64_t i = 0; i < images.count; ++i) {
      auto& top = out[static_cast<size_t>(i)];
      top.resize(static_cast<size_t>(k));
      for (int j = 0; j < k; ++j) {
        top[static_cast<size_t>(j)] = {static_cast<int>(idx[i * k + j]), v[i * k + j]};
      }
    }
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("forward of ", meta_.network, " epoch ", meta_.epoch,
                                            " failed: ", e.what_without_backtrace()));
  }
  return out;
}

}  // namespace dtrain::inference
