// The model replicas of a worker that trains on several devices (--gpus; docs/gpu.md):
// replica r lives on devices[r] and trains on the r-th slice of each batch; their
// gradients are summed into replica 0 by a LocalAggregator and copied once into the host
// model's gradients, which are what the kvstore pushes; after the pull the host model's
// weights are copied into replica 0 and broadcast to the others.
//
// The host model ("master") stays the one the trainer checkpoints, validates and checks
// for finite values; the replicas only compute. Create moves the master's weights, and
// gradients of their own, into one flat host tensor each (flat_parameters.h; pinned when a
// device is a GPU), and gives every replica the same layout on its device, so that a step
// moves all gradients to the host, and all weights back, with one asynchronous copy each:
// call it before anything keeps pointers to the master's weights (KVStore::Init), and do
// not reset the gradients to none (zero_grad(set_to_none)) afterwards. With one replica
// there is nothing to sum or broadcast, and the aggregator is not called.
// On CPU devices (tests, --cpu-replicas) the same code runs with a CpuAggregator, which is
// how it is tested without a GPU.
//
// Each replica's loss is its slice's mean cross-entropy scaled by slice/batch, so the
// summed gradient is the gradient of the whole batch's mean loss, as the single-device
// path computes it (equal up to float rounding: the sum is taken in another order).
// Buffers (batch-norm running statistics, input normalisation) are copied to the replicas
// when they are made; the trainer recomputes batch-norm statistics on the master.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/models/models.h"
#include "services/worker/device_copies.h"
#include "services/worker/kv/local_aggregator.h"

namespace dtrain::worker {

class DeviceReplicas {
 public:
  // `replicas[r]` is a network of the master's architecture, moved here to `devices[r]`
  // and given the master's parameters and buffers. INVALID_ARGUMENT when the counts
  // differ (replicas, devices, aggregator.num_replicas()) or a replica's parameters do not
  // match the master's shapes.
  static absl::StatusOr<std::unique_ptr<DeviceReplicas>> Create(models::Network& master,
                                                                std::vector<std::shared_ptr<models::Network>> replicas,
                                                                std::vector<torch::Device> devices,
                                                                std::unique_ptr<LocalAggregator> aggregator);

  struct StepResult {
    double loss = 0;      // the batch's mean cross-entropy
    int64_t correct = 0;  // samples whose arg-max logit is the label
  };
  // Forward and backward of every replica on its slice of (x, y) (x on the host, sliced
  // along dim 0; a batch smaller than the replica count leaves the last replicas idle),
  // the sum into replica 0, then replica 0's gradients copied into the master's `.grad()`.
  // DEADLINE_EXCEEDED from the aggregator when the sum is not done by `deadline`.
  absl::StatusOr<StepResult> Step(const torch::Tensor& x, const torch::Tensor& y, absl::Time deadline);

  // After the kvstore wrote the master's weights: to replica 0, then to every replica.
  absl::Status LoadWeights(absl::Time deadline);

  int num_replicas() const { return static_cast<int>(replicas_.size()); }
  models::Network& replica(int r) { return *replicas_[r]; }

 private:
  DeviceReplicas(models::Network& master, std::vector<std::shared_ptr<models::Network>> replicas,
                 std::vector<torch::Device> devices, std::unique_ptr<LocalAggregator> aggregator)
      : master_(master),
        replicas_(std::move(replicas)),
        devices_(std::move(devices)),
        aggregator_(std::move(aggregator)) {}

  // One ReplicaBuffers for all parameters: every replica's flat gradients (or weights).
  std::vector<ReplicaBuffers> Buffers(bool gradients) const;

  models::Network& master_;
  std::vector<std::shared_ptr<models::Network>> replicas_;
  std::vector<torch::Device> devices_;
  std::unique_ptr<LocalAggregator> aggregator_;
  std::unique_ptr<DeviceCopies> copies_;      // host<->device, and waits for the replicas' kernels
  FlatParameters master_flat_;                // the master's parameters and gradients (host)
  std::vector<FlatParameters> replica_flat_;  // [replica], the same layout on its device
};

}  // namespace dtrain::worker
