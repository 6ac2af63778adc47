// Stream-ordered host<->GPU copies for DeviceReplicas (device_copies.h), built when
// LibTorch has CUDA (DTRAIN_TORCH_CUDA). CI has no CUDA LibTorch: it compiles this file
// against Debian's CUDA LibTorch 2.6 headers (dtrain_cuda_compile_check); the image uses
// PyTorch 2.11's. Only C++ API present in both is used here.
//
// Per GPU: one side stream from LibTorch's pool for the copies, and CUDA events ordering it
// against the GPU's current (compute) stream, so a copy overlaps other GPUs' work and no
// step synchronises a whole device. Host buffers are pinned: a copy from pageable memory
// is staged by the driver and cannot be asynchronous.
#include "services/worker/device_copies.h"

#if DTRAIN_TORCH_CUDA

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/version.h>

static_assert(TORCH_VERSION_MAJOR >= 2, "device_copies_cuda.cc is written against LibTorch 2.x's CUDA API");

namespace dtrain::worker {
namespace {

class CudaCopies final : public DeviceCopies {
 public:
  explicit CudaCopies(std::vector<torch::Device> devices)
      : devices_(std::move(devices)),
        staged_x_(devices_.size()),
        staged_y_(devices_.size()),
        compute_done_(devices_.size()),
        copied_(devices_.size()) {
    for (const torch::Device& d : devices_) {
      side_.push_back(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index()));
    }
  }

  void PrepareHost(const std::vector<torch::Tensor>& master_params) override {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& p : master_params) {
      torch::Tensor param = p;  // a handle on the same parameter: set_data changes it in place
      param.set_data(p.detach().pin_memory());
      param.mutable_grad() = torch::zeros(p.sizes(), p.options().pinned_memory(true));
    }
  }

  std::pair<torch::Tensor, torch::Tensor> ToReplica(int r, const torch::Tensor& x, const torch::Tensor& y) override {
    const c10::cuda::CUDAGuard on_device(devices_[r]);
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(devices_[r].index());
    // The staging buffers are rewritten below: the previous step's copies from them must be done.
    copied_[r].synchronize();
    const torch::Tensor px = Stage(staged_x_[r], x);
    const torch::Tensor py = Stage(staged_y_[r], y);
    // Allocated on the compute stream, which frees them; their memory may have been in use by
    // kernels still queued there, so the side stream starts after what is queued so far.
    torch::Tensor dx = torch::empty(x.sizes(), x.options().device(devices_[r]));
    torch::Tensor dy = torch::empty(y.sizes(), y.options().device(devices_[r]));
    compute_done_[r].record(compute);
    compute_done_[r].block(side_[r]);
    {
      const c10::cuda::CUDAStreamGuard on_side(side_[r]);
      dx.copy_(px, /*non_blocking=*/true);
      dy.copy_(py, /*non_blocking=*/true);
    }
    copied_[r].record(side_[r]);
    copied_[r].block(compute);
    return {dx, dy};
  }

  void AwaitReplicas() override {
    // Every GPU's event first, then the waits: the GPUs keep working in parallel.
    for (size_t r = 0; r < devices_.size(); ++r) {
      const c10::cuda::CUDAGuard on_device(devices_[r]);
      compute_done_[r].record(c10::cuda::getCurrentCUDAStream(devices_[r].index()));
    }
    for (at::cuda::CUDAEvent& e : compute_done_) e.synchronize();
  }

  void ToHost(const std::vector<torch::Tensor>& device, const std::vector<torch::Tensor>& host) override {
    CopyOnSide(device, host);
  }

  void FromHost(const std::vector<torch::Tensor>& host, const std::vector<torch::Tensor>& device) override {
    CopyOnSide(host, device);
  }

 private:
  // `from` into a pinned host buffer kept in `buffer` (reallocated when the shape changes).
  static torch::Tensor Stage(torch::Tensor& buffer, const torch::Tensor& from) {
    if (!buffer.defined() || !buffer.sizes().equals(from.sizes()) || buffer.scalar_type() != from.scalar_type()) {
      buffer = torch::empty(from.sizes(), from.options().device(torch::kCPU).pinned_memory(true));
    }
    buffer.copy_(from);
    return buffer;
  }

  // from[i] into to[i] on replica 0's side stream, after its compute stream's work; then one
  // wait for that stream (not the device) before the host or the aggregator reads them.
  void CopyOnSide(const std::vector<torch::Tensor>& from, const std::vector<torch::Tensor>& to) {
    torch::NoGradGuard no_grad;
    const c10::cuda::CUDAGuard on_device(devices_[0]);
    compute_done_[0].record(c10::cuda::getCurrentCUDAStream(devices_[0].index()));
    compute_done_[0].block(side_[0]);
    {
      const c10::cuda::CUDAStreamGuard on_side(side_[0]);
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i], /*non_blocking=*/true);
    }
    side_[0].synchronize();
  }

  std::vector<torch::Device> devices_;
  std::vector<c10::cuda::CUDAStream> side_;
  std::vector<torch::Tensor> staged_x_, staged_y_;  // pinned, per replica
  std::vector<at::cuda::CUDAEvent> compute_done_;   // per replica: its compute stream reached here
  std::vector<at::cuda::CUDAEvent> copied_;         // per replica: its inputs are on the device
};

}  // namespace

std::unique_ptr<DeviceCopies> MakeCudaDeviceCopies(const std::vector<torch::Device>& devices) {
  return std::make_unique<CudaCopies>(devices);
}

}  // namespace dtrain::worker

#endif  // DTRAIN_TORCH_CUDA
