// Stream-ordered host<->GPU copies for DeviceReplicas (device_copies.h), built when
// LibTorch has CUDA (DTRAIN_TORCH_CUDA). CI has no CUDA LibTorch: it compiles this file
// against Debian's CUDA LibTorch 2.6 headers (dtrain_cuda_compile_check); the image uses
// PyTorch 2.11's. So only long-stable API is used: c10::cuda's streams and guards, and
// the CUDA runtime's own events (at::cuda::CUDAEvent has moved between headers and
// namespaces across LibTorch versions).
//
// Per GPU: one side stream from LibTorch's pool for the copies, and CUDA events ordering it
// against the GPU's current (compute) stream, so a copy overlaps other GPUs' work and no
// step synchronises a whole device. Host buffers are pinned: a copy from pageable memory
// is staged by the driver and cannot be asynchronous.
#include "services/worker/device_copies.h"

#if DTRAIN_TORCH_CUDA

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <torch/version.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

static_assert(TORCH_VERSION_MAJOR >= 2, "device_copies_cuda.cc is written against LibTorch 2.x's CUDA API");

namespace dtrain::worker {
namespace {

absl::Status CudaStatus(cudaError_t e, const char* call, size_t replica) {
  if (e == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();  // clears it, so that LibTorch's next check does not report it again
  return absl::InternalError(
      absl::StrCat(call, " (replica ", replica, "): ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"));
}

// A CUDA event of one device (the first stream it is recorded on), made at first use,
// without timing (cheaper to record and wait for).
class Event {
 public:
  explicit Event(size_t replica) : replica_(replica) {}
  Event(Event&& other) noexcept
      : replica_(other.replica_), device_(other.device_), event_(std::exchange(other.event_, nullptr)) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (event_ != nullptr) {
      const c10::cuda::CUDAGuard on_device(device_);
      (void)cudaEventDestroy(event_);
    }
  }

  // Marks the point `stream` has reached in its queue.
  absl::Status Record(const c10::cuda::CUDAStream& stream) {
    const c10::cuda::CUDAGuard on_device(stream.device_index());
    if (event_ == nullptr) {
      DTRAIN_RETURN_IF_ERROR(
          CudaStatus(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags", replica_));
      device_ = stream.device_index();
    }
    return CudaStatus(cudaEventRecord(event_, stream.stream()), "cudaEventRecord", replica_);
  }
  // Makes `stream` wait (on the device) for the recorded point; nothing before a record.
  absl::Status Block(const c10::cuda::CUDAStream& stream) const {
    if (event_ == nullptr) return absl::OkStatus();
    const c10::cuda::CUDAGuard on_device(stream.device_index());
    return CudaStatus(cudaStreamWaitEvent(stream.stream(), event_, 0), "cudaStreamWaitEvent", replica_);
  }
  // Waits on the host for the recorded point; nothing before a record.
  absl::Status Synchronize() const {
    if (event_ == nullptr) return absl::OkStatus();
    return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize", replica_);
  }

 private:
  size_t replica_;
  c10::DeviceIndex device_ = 0;
  cudaEvent_t event_ = nullptr;
};

class CudaCopies final : public DeviceCopies {
 public:
  explicit CudaCopies(std::vector<torch::Device> devices) : devices_(std::move(devices)) {
    for (size_t r = 0; r < devices_.size(); ++r) {
      side_.push_back(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, devices_[r].index()));
      staged_x_.emplace_back();
      staged_y_.emplace_back();
      compute_done_.emplace_back(r);
      copied_.emplace_back(r);
    }
  }

  absl::StatusOr<FlatParameters> PrepareHost(const std::vector<torch::Tensor>& master_params) override {
    return Flatten(master_params, torch::TensorOptions().device(torch::kCPU).pinned_memory(true));
  }

  absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> ToReplica(int r, const torch::Tensor& x,
                                                                    const torch::Tensor& y) override {
    const c10::cuda::CUDAGuard on_device(devices_[r]);
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(devices_[r].index());
    // The staging buffers are rewritten below: the previous step's copies from them must be done.
    DTRAIN_RETURN_IF_ERROR(copied_[r].Synchronize());
    const torch::Tensor px = Stage(staged_x_[r], x);
    const torch::Tensor py = Stage(staged_y_[r], y);
    // Allocated on the compute stream, which frees them; their memory may have been in use by
    // kernels still queued there, so the side stream starts after what is queued so far.
    torch::Tensor dx = torch::empty(x.sizes(), x.options().device(devices_[r]));
    torch::Tensor dy = torch::empty(y.sizes(), y.options().device(devices_[r]));
    DTRAIN_RETURN_IF_ERROR(compute_done_[r].Record(compute));
    DTRAIN_RETURN_IF_ERROR(compute_done_[r].Block(side_[r]));
    {
      const c10::cuda::CUDAStreamGuard on_side(side_[r]);
      dx.copy_(px, /*non_blocking=*/true);
      dy.copy_(py, /*non_blocking=*/true);
    }
    DTRAIN_RETURN_IF_ERROR(copied_[r].Record(side_[r]));
    DTRAIN_RETURN_IF_ERROR(copied_[r].Block(compute));
    return std::make_pair(std::move(dx), std::move(dy));
  }

  absl::Status AwaitReplicas() override {
    // Every GPU's event first, then the waits: the GPUs keep working in parallel.
    for (size_t r = 0; r < devices_.size(); ++r) {
      DTRAIN_RETURN_IF_ERROR(compute_done_[r].Record(c10::cuda::getCurrentCUDAStream(devices_[r].index())));
    }
    for (const Event& e : compute_done_) DTRAIN_RETURN_IF_ERROR(e.Synchronize());
    return absl::OkStatus();
  }

  absl::Status ToHost(const std::vector<torch::Tensor>& device, const std::vector<torch::Tensor>& host) override {
    return CopyOnSide(device, host);
  }

  absl::Status FromHost(const std::vector<torch::Tensor>& host, const std::vector<torch::Tensor>& device) override {
    return CopyOnSide(host, device);
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
  absl::Status CopyOnSide(const std::vector<torch::Tensor>& from, const std::vector<torch::Tensor>& to) {
    torch::NoGradGuard no_grad;
    const c10::cuda::CUDAGuard on_device(devices_[0]);
    DTRAIN_RETURN_IF_ERROR(compute_done_[0].Record(c10::cuda::getCurrentCUDAStream(devices_[0].index())));
    DTRAIN_RETURN_IF_ERROR(compute_done_[0].Block(side_[0]));
    {
      const c10::cuda::CUDAStreamGuard on_side(side_[0]);
      for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i], /*non_blocking=*/true);
    }
    return CudaStatus(cudaStreamSynchronize(side_[0].stream()), "cudaStreamSynchronize", 0);
  }

  std::vector<torch::Device> devices_;
  std::vector<c10::cuda::CUDAStream> side_;
  std::vector<torch::Tensor> staged_x_, staged_y_;  // pinned, per replica
  std::vector<Event> compute_done_;                 // per replica: its compute stream reached here
  std::vector<Event> copied_;                       // per replica: its inputs are on the device
};

}  // namespace

std::unique_ptr<DeviceCopies> MakeCudaDeviceCopies(const std::vector<torch::Device>& devices) {
  return std::make_unique<CudaCopies>(devices);
}

}  // namespace dtrain::worker

#endif  // DTRAIN_TORCH_CUDA
