// One checkpoint, loaded and frozen: the network with its weights, and what the symbol
// file says about it. Never modified after Load, so any number of threads may call
// Predict at once with no lock; a reload builds a new LoadedModel instead of changing
// this one (see ModelHolder).
//
// LibTorch stays behind the pimpl: this header is included by the gRPC service and the
// watcher, which need not compile <torch/torch.h>.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/inference/class_outputs.h"
#include "services/inference/image_batch.h"

namespace dtrain::inference {

struct ModelMeta {
  std::string prefix;
  std::string network;
  int num_classes = 0;
  std::vector<std::string> class_names;  // one per class; numbers when the symbol has none
  std::vector<int64_t> input_shape;      // one image, e.g. {1, 28, 28}
  int epoch = 0;
  std::string params_path;
  absl::Time loaded_at;
};

class LoadedModel {
 public:
  // Reads PREFIX-symbol.json and PREFIX-NNNN.params, builds the network and runs it once
  // on a blank image. Refuses, naming the file: a missing or corrupt file (NOT_FOUND,
  // DATA_LOSS), weights whose names or shapes differ from the network's, weights that
  // are NaN or infinite, or an input shape the network cannot take
  // (FAILED_PRECONDITION).
  static absl::StatusOr<std::shared_ptr<const LoadedModel>> Load(const std::string& prefix, int epoch);

  ~LoadedModel();
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  const ModelMeta& meta() const { return meta_; }

  // Runs the images of every part as one forward pass (the parts one after another)
  // and answers each part's logits and probabilities. Thread-safe; runs in inference
  // mode (no autograd). Every part must come from ValidateImages with this model's
  // input shape (INTERNAL otherwise); parts may mix uint8 and float32 pixels.
  absl::StatusOr<std::vector<ClassOutputs>> Forward(const std::vector<const ImageBatchView*>& parts) const;

  // Forward of one part, then its `top_k` classes (TopClasses).
  absl::StatusOr<Predictions> Predict(const ImageBatchView& images, int top_k) const;

 private:
  struct Net;  // the LibTorch network
  LoadedModel(ModelMeta meta, std::unique_ptr<Net> net);

  const ModelMeta meta_;
  const std::unique_ptr<Net> net_;
};

}  // namespace dtrain::inference
