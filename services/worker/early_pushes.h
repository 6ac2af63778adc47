// Overlap of communication with backward (--overlap): an autograd hook on each
// parameter hands its gradient to the kvstore (KVStore::PushEarly) the moment backward
// produces it, so the last layers' transfers and the servers' merges run while the first
// layers' gradients are still being computed. The values pushed are the ones PushPull
// would push, so the weights are the same, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {

class EarlyPushes {
 public:
  // Registers one hook per parameter (none when the kvstore does not push early);
  // `params` and `kv` must outlive this. The destructor removes the hooks.
  EarlyPushes(std::vector<torch::Tensor>& params, KVStore& kv);
  ~EarlyPushes();
  EarlyPushes(const EarlyPushes&) = delete;
  EarlyPushes& operator=(const EarlyPushes&) = delete;

  // Before each backward: the step the hooks push for.
  void StartStep(int64_t step);
  // After backward: the first error a hook's push returned (OK if none). A gradient
  // that is not finite is not pushed; the step's finiteness check reports it.
  const absl::Status& status() const { return status_; }
  bool active() const { return !hooks_.empty(); }

 private:
  std::vector<torch::Tensor>& params_;
  KVStore& kv_;
  std::vector<unsigned> hooks_;
  int64_t step_ = -1;
  // The gradients handed over this step, kept alive until the next StartStep (the
  // kvstore sends them without a copy).
  std::vector<torch::Tensor> held_;
  absl::Status status_;
};

}  // namespace dtrain::worker
