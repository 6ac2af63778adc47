#include "services/worker/device_replicas.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace dtrain::worker {
namespace {

// Copies `from` into `to` tensor by tensor; INVALID_ARGUMENT when the lists differ.
absl::Status CopyAll(const std::vector<torch::Tensor>& from, const std::vector<torch::Tensor>& to, int replica,
                     const char* what) {
  if (from.size() != to.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica ", replica, " has ", to.size(), " ", what, ", the master ", from.size()));
  }
  for (size_t i = 0; i < from.size(); ++i) {
    if (!from[i].sizes().equals(to[i].sizes())) {
      return absl::InvalidArgumentError(absl::StrCat("replica ", replica, ": ", what, " ", i,
                                                     " has another shape "
                                                     "than the master's"));
    }
    to[i].copy_(from[i]);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceReplicas>> DeviceReplicas::Create(
    models::Network& master, std::vector<std::shared_ptr<models::Network>> replicas, std::vector<torch::Device> devices,
    std::unique_ptr<LocalAggregator> aggregator) {
  if (replicas.empty() || replicas.size() != devices.size() || aggregator == nullptr ||
      aggregator->num_replicas() != static_cast<int>(replicas.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(replicas.size(), " replicas on ", devices.size(), " devices with an aggregator over ",
                     aggregator == nullptr ? 0 : aggregator->num_replicas(), ": one replica per device, at least one"));
  }
  std::unique_ptr<DeviceReplicas> d(
      new DeviceReplicas(master, std::move(replicas), std::move(devices), std::move(aggregator)));
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> master_params = master.parameters();
  d->copies_ = MakeDeviceCopies(d->devices_);
  // Before the parameters are read below: they move into the flat (on GPUs, pinned) tensors.
  DTRAIN_ASSIGN_OR_RETURN(d->master_flat_, d->copies_->PrepareHost(master_params));
  for (int r = 0; r < d->num_replicas(); ++r) {
    d->replicas_[r]->to(d->devices_[r]);
    const std::vector<torch::Tensor> params = d->replicas_[r]->parameters();
    DTRAIN_RETURN_IF_ERROR(CopyAll(master_params, params, r, "parameters"));
    DTRAIN_RETURN_IF_ERROR(CopyAll(master.buffers(), d->replicas_[r]->buffers(), r, "buffers"));
    // The same layout as the master's: one copy moves all gradients, or all weights.
    DTRAIN_ASSIGN_OR_RETURN(FlatParameters flat, Flatten(params, torch::TensorOptions().device(d->devices_[r])));
    d->replica_flat_.push_back(std::move(flat));
  }
  return d;
}

std::vector<ReplicaBuffers> DeviceReplicas::Buffers(bool gradients) const {
  ReplicaBuffers all;
  all.numel = master_flat_.values.numel();
  for (const FlatParameters& flat : replica_flat_) {
    all.per_replica.push_back((gradients ? flat.grads : flat.values).data_ptr<float>());
  }
  return {all};
}

absl::StatusOr<DeviceReplicas::StepResult> DeviceReplicas::Step(const torch::Tensor& x, const torch::Tensor& y,
                                                                absl::Time deadline) {
  const int64_t n = x.size(0);
  const int64_t per = (n + num_replicas() - 1) / num_replicas();
  // Losses and hit counts stay tensors until every replica has been launched, so that a
  // GPU's work is not waited for before the next GPU's is queued.
  std::vector<torch::Tensor> losses, hits;
  for (int r = 0; r < num_replicas(); ++r) {
    // Every replica's, an idle one's too: the aggregator sums them all.
    replica_flat_[r].grads.zero_();
    const int64_t start = r * per;
    const int64_t len = std::min(per, n - start);
    if (len <= 0) continue;
    DTRAIN_ASSIGN_OR_RETURN(const auto slice, copies_->ToReplica(r, x.narrow(0, start, len), y.narrow(0, start, len)));
    const auto& [xr, yr] = slice;
    torch::Tensor logits = replicas_[r]->forward(xr);
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(logits, yr) * (static_cast<double>(len) / static_cast<double>(n));
    loss.backward();
    losses.push_back(loss.detach());
    hits.push_back(logits.argmax(1).eq(yr).sum());
  }
  // One replica's sum is itself: its gradients go to the host as they are.
  if (num_replicas() > 1) {
    DTRAIN_RETURN_IF_ERROR(copies_->AwaitReplicas());
    DTRAIN_RETURN_IF_ERROR(aggregator_->Reduce(Buffers(/*gradients=*/true)));
    DTRAIN_RETURN_IF_ERROR(aggregator_->Wait(deadline));
  }
  DTRAIN_RETURN_IF_ERROR(copies_->ToHost({replica_flat_[0].grads}, {master_flat_.grads}));
  StepResult result;
  for (const torch::Tensor& l : losses) result.loss += l.item<double>();
  for (const torch::Tensor& h : hits) result.correct += h.item<int64_t>();
  return result;
}

absl::Status DeviceReplicas::LoadWeights(absl::Time deadline) {
  DTRAIN_RETURN_IF_ERROR(copies_->FromHost({master_flat_.values}, {replica_flat_[0].values}));
  if (num_replicas() == 1) return absl::OkStatus();
  DTRAIN_RETURN_IF_ERROR(aggregator_->Broadcast(Buffers(/*gradients=*/false)));
  return aggregator_->Wait(deadline);
}

}  // namespace dtrain::worker
