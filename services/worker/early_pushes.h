// Overlap of communication with backward (--overlap): an autograd hook on each
// parameter offers its gradient to the step's OpenStep (KVStore::BeginStep) the moment
// backward produces it, so that a store that pushes early sends the last layers' keys,
// and the servers merge them, while the first layers' gradients are still being
// computed. The values pushed are the ones PushPull would push, so the weights are the
// same, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {

class EarlyPushes {
 public:
  // `params` must outlive this. The hooks are registered at the first step whose store
  // pushes early (none for one that does not); the destructor removes them.
  explicit EarlyPushes(std::vector<torch::Tensor>& params);
  ~EarlyPushes();
  EarlyPushes(const EarlyPushes&) = delete;
  EarlyPushes& operator=(const EarlyPushes&) = delete;

  // Before each backward: the step the hooks offer the gradients to, which must outlive
  // the End after that backward. Drops the gradients held for the step before.
  void Begin(OpenStep& step);
  // After backward: the hooks offer nothing more; the first error an Offer returned
  // (OK if none). A gradient that is not finite is not offered; the step's finiteness
  // check reports it.
  absl::Status End();

 private:
  std::vector<torch::Tensor>& params_;
  std::vector<unsigned> hooks_;
  OpenStep* step_ = nullptr;  // between Begin and End
  // The gradients offered this step, kept alive until the next Begin (the store sends
  // them without a copy, and its handle's Wait comes before that Begin).
  std::vector<torch::Tensor> held_;
  absl::Status status_;
};

}  // namespace dtrain::worker
