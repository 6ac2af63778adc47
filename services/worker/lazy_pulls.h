// Overlap of the pulls with the next forward (--overlap; P3 and ByteScheduler
// do the same). Without it a step ends only once every key's new weights are in. With
// it the step ends once its gradients are sent: the next batch's forward starts at once
// and waits for each layer's weights only when it reaches that layer (the network's
// param gate, which waits on the step's PendingStep::WaitParam), so the first layers
// compute while the later layers' weights are still arriving. Every parameter's weights
// are in before its first use and all of them before backward (PendingStep::Wait), so
// the weights, and the run, are the same bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "common/models/models.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {

class LazyPulls {
 public:
  // `net` must outlive this. Its param gate is set at the first step held (none for a
  // store whose steps are done when sent) and removed by the destructor, after waiting
  // for a step still pending.
  explicit LazyPulls(models::Network& net);
  ~LazyPulls();
  LazyPulls(const LazyPulls&) = delete;
  LazyPulls& operator=(const LazyPulls&) = delete;

  // After backward: the handle OpenStep::Send returned for `step`. One already done
  // gives its status at once. Otherwise it is held until Finish, with `params`'
  // gradients (the next zero_grad drops the parameters' references while gRPC may
  // still be sending from them), and the next forward's gate waits on it.
  absl::Status Hold(int64_t step, std::unique_ptr<PendingStep> pending, const std::vector<torch::Tensor>& params);
  // After the next forward, and at the epoch's end: every weight of the step held is
  // in; its error if it failed (a rollback order, a dead server, the sync timeout).
  absl::Status Finish();
  // Seconds the gate spent waiting for weights since the last call: time the forward
  // did not compute, so the step does not count it as compute.
  double TakeGateSeconds();

 private:
  // Indices (into net.parameters()) of the parameters `module` holds.
  const std::vector<size_t>& ParamsOf(const torch::nn::Module& module);
  void Gate(const torch::nn::Module& module);
  void SetGate();

  models::Network& net_;
  bool gated_ = false;
  std::unique_ptr<PendingStep> pending_;              // the step held (null: none)
  std::unordered_map<const void*, size_t> index_of_;  // TensorImpl -> parameter index
  std::unordered_map<const torch::nn::Module*, std::vector<size_t>> params_of_;
  std::vector<torch::Tensor> held_;  // the pending step's gradients
  double gate_seconds_ = 0;
};

}  // namespace dtrain::worker
