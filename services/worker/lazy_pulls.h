// Overlap of the pulls with the next forward (--overlap; P3 and ByteScheduler
// do the same). Without it a step ends only once every key's new weights are in. With
// it the step ends once its gradients are sent: the next batch's forward starts at once
// and waits for each layer's weights only when it reaches that layer (the network's
// param gate), so the first layers compute while the later layers' weights are still
// arriving. Every parameter's weights are in before its first use and all of them
// before backward, so the weights, and the run, are the same bit for bit.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "common/models/models.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {

class LazyPulls {
 public:
  // Active only when `kv` pulls lazily (KVStore::PullsLazily): then sets `net`'s param
  // gate, which the destructor removes after finishing any step still pending. `net`
  // and `kv` must outlive this.
  LazyPulls(models::Network& net, KVStore& kv);
  ~LazyPulls();
  LazyPulls(const LazyPulls&) = delete;
  LazyPulls& operator=(const LazyPulls&) = delete;

  bool active() const { return active_; }
  // After backward: sends `step` (KVStore::StartPushPull) and keeps `params`' gradients
  // alive until its pulls are in (the next zero_grad drops the parameters' references
  // while gRPC may still be sending from them).
  absl::Status Start(int64_t step, const std::vector<torch::Tensor>& params, const std::vector<const float*>& grads);
  // After the next forward, and at the epoch's end: every weight of the pending step is
  // in; its error if it failed (a rollback order, a dead server, the sync timeout).
  absl::Status Finish();
  // Seconds the gate spent waiting for weights since the last call: time the forward
  // did not compute, so the step does not count it as compute.
  double TakeGateSeconds();

 private:
  // Indices (into net.parameters()) of the parameters `module` holds.
  const std::vector<size_t>& ParamsOf(const torch::nn::Module& module);
  void Gate(const torch::nn::Module& module);

  models::Network& net_;
  KVStore& kv_;
  bool active_ = false;
  bool pending_ = false;
  bool logged_ = false;
  std::unordered_map<const void*, size_t> index_of_;  // TensorImpl -> parameter index
  std::unordered_map<const torch::nn::Module*, std::vector<size_t>> params_of_;
  std::vector<torch::Tensor> held_;  // the pending step's gradients
  double gate_seconds_ = 0;
};

}  // namespace dtrain::worker
