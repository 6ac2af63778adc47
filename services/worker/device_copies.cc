#include "services/worker/device_copies.h"

#include <torch/cuda.h>

#include <algorithm>

namespace dtrain::worker {
namespace {

// Each copy returns when done (copy_ and to() block for a device-to-host copy and, from
// pageable memory, for host-to-device too); the replicas' kernels are waited for by a
// whole-device synchronisation. Exact on CPU devices, where nothing is asynchronous.
class SyncCopies final : public DeviceCopies {
 public:
  explicit SyncCopies(std::vector<torch::Device> devices) : devices_(std::move(devices)) {}

  absl::StatusOr<FlatParameters> PrepareHost(const std::vector<torch::Tensor>& master_params) override {
    return Flatten(master_params, torch::TensorOptions().device(torch::kCPU));
  }

  absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> ToReplica(int r, const torch::Tensor& x,
                                                                    const torch::Tensor& y) override {
    return std::make_pair(x.to(devices_[r]), y.to(devices_[r]));
  }

  absl::Status AwaitReplicas() override {
    for (const torch::Device& dev : devices_) {
      if (dev.is_cuda()) torch::cuda::synchronize(dev.index());
    }
    return absl::OkStatus();
  }

  absl::Status ToHost(const std::vector<torch::Tensor>& device, const std::vector<torch::Tensor>& host) override {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < device.size(); ++i) host[i].copy_(device[i]);
    return absl::OkStatus();
  }

  absl::Status FromHost(const std::vector<torch::Tensor>& host, const std::vector<torch::Tensor>& device) override {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < host.size(); ++i) device[i].copy_(host[i]);
    return AwaitReplicas();
  }

 private:
  std::vector<torch::Device> devices_;
};

}  // namespace

std::unique_ptr<DeviceCopies> MakeDeviceCopies(const std::vector<torch::Device>& devices) {
#if DTRAIN_TORCH_CUDA
  if (!devices.empty() &&
      std::all_of(devices.begin(), devices.end(), [](const torch::Device& d) { return d.is_cuda(); })) {
    return MakeCudaDeviceCopies(devices);
  }
#endif
  return std::make_unique<SyncCopies>(devices);
}

}  // namespace dtrain::worker
