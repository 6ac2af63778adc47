#include "services/worker/device_replicas.h"

#include <torch/cuda.h>

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
    return absl::InvalidArgumentError(absl::StrCat("replica ", replica, " has ", to.size(), " ", what,
                                                   ", the master ", from.size()));
  }
  for (size_t i = 0; i < from.size(); ++i) {
    if (!from[i].sizes().equals(to[i].sizes())) {
      return absl::InvalidArgumentError(absl::StrCat("replica ", replica, ": ", what, " ", i, " has another shape "
                                                     "than the master's"));
    }
    to[i].copy_(from[i]);
  }
  return absl::OkStatus();
}

// A gradient for every parameter, zero where backward left none (an idle replica, or a
// parameter the batch did not reach), so that every buffer the aggregator sums exists.
void ZeroGradients(const std::vector<torch::Tensor>& params) {
  for (const torch::Tensor& p : params) {
    if (p.grad().defined()) {
      p.grad().zero_();
    } else {
      p.mutable_grad() = torch::zeros_like(p);
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceReplicas>> DeviceReplicas::Create(
    models::Network& master, std::vector<std::shared_ptr<models::Network>> replicas,
    std::vector<torch::Device> devices, std::unique_ptr<LocalAggregator> aggregator) {
  if (replicas.empty() || replicas.size() != devices.size() || aggregator == nullptr ||
      aggregator->num_replicas() != static_cast<int>(replicas.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        replicas.size(), " replicas on ", devices.size(), " devices with an aggregator over ",
        aggregator == nullptr ? 0 : aggregator->num_replicas(), ": one replica per device, at least one"));
  }
  std::unique_ptr<DeviceReplicas> d(
      new DeviceReplicas(master, std::move(replicas), std::move(devices), std::move(aggregator)));
  torch::NoGradGuard no_grad;
  d->master_params_ = master.parameters();
  const bool any_cuda = std::any_of(d->devices_.begin(), d->devices_.end(),
                                    [](const torch::Device& dev) { return dev.is_cuda(); });
  for (int r = 0; r < d->num_replicas(); ++r) {
    d->replicas_[r]->to(d->devices_[r]);
    d->replica_params_.push_back(d->replicas_[r]->parameters());
    DTRAIN_RETURN_IF_ERROR(CopyAll(d->master_params_, d->replica_params_[r], r, "parameters"));
    DTRAIN_RETURN_IF_ERROR(CopyAll(master.buffers(), d->replicas_[r]->buffers(), r, "buffers"));
  }
  // The master's gradients are what the kvstore reads: written here by one copy per step,
  // from the GPU into pinned memory when there is a GPU (pageable memory would be staged).
  for (const torch::Tensor& p : d->master_params_) {
    p.mutable_grad() = any_cuda ? torch::zeros(p.sizes(), p.options().pinned_memory(true)) : torch::zeros_like(p);
  }
  return d;
}

std::vector<ReplicaBuffers> DeviceReplicas::Buffers(bool gradients) const {
  std::vector<ReplicaBuffers> out(master_params_.size());
  for (size_t i = 0; i < master_params_.size(); ++i) {
    out[i].numel = master_params_[i].numel();
    for (int r = 0; r < num_replicas(); ++r) {
      const torch::Tensor& t = gradients ? replica_params_[r][i].grad() : replica_params_[r][i];
      out[i].per_replica.push_back(t.data_ptr<float>());
    }
  }
  return out;
}

void DeviceReplicas::SynchronizeDevices() const {
  for (const torch::Device& dev : devices_) {
    if (dev.is_cuda()) torch::cuda::synchronize(dev.index());
  }
}

absl::StatusOr<DeviceReplicas::StepResult> DeviceReplicas::Step(const torch::Tensor& x, const torch::Tensor& y,
                                                                absl::Time deadline) {
  const int64_t n = x.size(0);
  const int64_t per = (n + num_replicas() - 1) / num_replicas();
  // Losses and hit counts stay tensors until every replica has been launched, so that a
  // GPU's work is not waited for before the next GPU's is queued.
  std::vector<torch::Tensor> losses, hits;
  for (int r = 0; r < num_replicas(); ++r) {
    ZeroGradients(replica_params_[r]);
    const int64_t start = r * per;
    const int64_t len = std::min(per, n - start);
    if (len <= 0) continue;
    torch::Tensor xr = x.narrow(0, start, len).to(devices_[r]);
    torch::Tensor yr = y.narrow(0, start, len).to(devices_[r]);
    torch::Tensor logits = replicas_[r]->forward(xr);
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits, yr) *
                         (static_cast<double>(len) / static_cast<double>(n));
    loss.backward();
    losses.push_back(loss.detach());
    hits.push_back(logits.argmax(1).eq(yr).sum());
  }
  SynchronizeDevices();
  DTRAIN_RETURN_IF_ERROR(aggregator_->Reduce(Buffers(/*gradients=*/true)));
  DTRAIN_RETURN_IF_ERROR(aggregator_->Wait(deadline));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < master_params_.size(); ++i) master_params_[i].grad().copy_(replica_params_[0][i].grad());
  StepResult result;
  for (const torch::Tensor& l : losses) result.loss += l.item<double>();
  for (const torch::Tensor& h : hits) result.correct += h.item<int64_t>();
  return result;
}

absl::Status DeviceReplicas::LoadWeights(absl::Time deadline) {
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < master_params_.size(); ++i) replica_params_[0][i].copy_(master_params_[i]);
  }
  SynchronizeDevices();
  DTRAIN_RETURN_IF_ERROR(aggregator_->Broadcast(Buffers(/*gradients=*/false)));
  return aggregator_->Wait(deadline);
}

}  // namespace dtrain::worker
