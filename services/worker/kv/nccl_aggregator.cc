#include "services/worker/kv/nccl_aggregator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace dtrain::worker {
namespace {

std::string CudaText(cudaError_t e) { return absl::StrCat(cudaGetErrorName(e), " (", cudaGetErrorString(e), ")"); }

absl::Status CudaError(const std::string& call, cudaError_t e) {
  // A driver or device that is not there is the machine's state, not a bug here.
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    return absl::FailedPreconditionError(absl::StrCat(call, ": ", CudaText(e)));
  }
  return absl::InternalError(absl::StrCat(call, ": ", CudaText(e)));
}

absl::Status NcclError(const std::string& call, ncclResult_t r, ncclComm_t comm = nullptr) {
  std::string text = absl::StrCat(call, ": ", ncclGetErrorString(r));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  // NCCL's own account of the last failure (a peer, a transport), when it has one.
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') {
    absl::StrAppend(&text, ": ", last);
  }
#else
  (void)comm;
#endif
  return absl::InternalError(text);
}

#define DTRAIN_CUDA_RETURN_IF_ERROR(call, where)                             \
  do {                                                                       \
    cudaError_t dtrain_cuda_error_ = (call);                                 \
    if (dtrain_cuda_error_ != cudaSuccess) {                                 \
      (void)cudaGetLastError(); /* clears it, so it is not seen again */     \
      return CudaError(absl::StrCat(#call, " ", where), dtrain_cuda_error_); \
    }                                                                        \
  } while (0)

std::string Where(int replica, int gpu) { return absl::StrCat("(replica ", replica, ", GPU ", gpu, ")"); }

// Puts back the caller's current device (LibTorch keeps its own notion of it).
class DeviceRestorer {
 public:
  DeviceRestorer() {
    if (cudaGetDevice(&device_) != cudaSuccess) {
      (void)cudaGetLastError();
      device_ = -1;
    }
  }
  ~DeviceRestorer() {
    if (device_ >= 0) (void)cudaSetDevice(device_);
  }

 private:
  int device_ = -1;
};

absl::Status CheckGpuList(const std::vector<int>& gpus) {
  if (gpus.empty()) return absl::InvalidArgumentError("the NCCL aggregator needs at least one GPU");
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] < 0) return absl::InvalidArgumentError(absl::StrCat("GPU ", gpus[i], " is not a device ordinal"));
    if (std::find(gpus.begin(), gpus.begin() + i, gpus[i]) != gpus.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ", gpus[i], " is listed twice (one replica per GPU): ", absl::StrJoin(gpus, ",")));
    }
  }
  return absl::OkStatus();
}

std::string VisibleDevicesText() {
  // CUDA's own variable, read here only to quote it in an error: the CUDA runtime
  // applies it, not dtrain's flags.
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v == nullptr ? "CUDA_VISIBLE_DEVICES unset" : absl::StrCat("CUDA_VISIBLE_DEVICES=\"", v, "\"");
}

// FAILED_PRECONDITION unless every GPU asked for is a device this process can use.
absl::Status CheckDevicesPresent(const std::vector<int>& gpus) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device for GPUs ", absl::StrJoin(gpus, ","), ": cudaGetDeviceCount found 0 devices",
        e == cudaSuccess ? std::string() : absl::StrCat(" and returned ", CudaText(e)), "; ", VisibleDevicesText()));
  }
  for (int g : gpus) {
    if (g >= count) {
      return absl::FailedPreconditionError(absl::StrCat("GPU ", g, " does not exist: cudaGetDeviceCount found ", count,
                                                        " device(s), 0..", count - 1, "; ", VisibleDevicesText()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclAggregator>> NcclAggregator::Create(const std::vector<int>& gpus) {
  DTRAIN_RETURN_IF_ERROR(CheckGpuList(gpus));
  DTRAIN_RETURN_IF_ERROR(CheckDevicesPresent(gpus));
  DeviceRestorer restore;
  std::unique_ptr<NcclAggregator> agg(new NcclAggregator(gpus));
  const int n = static_cast<int>(gpus.size());
  std::vector<ncclComm_t> comms(n, nullptr);
  if (ncclResult_t r = ncclCommInitAll(comms.data(), n, gpus.data()); r != ncclSuccess) {
    return NcclError(absl::StrCat("ncclCommInitAll over GPUs ", absl::StrJoin(gpus, ",")), r);
  }
  agg->comms_.assign(comms.begin(), comms.end());
  for (int r = 0; r < n; ++r) {
    DTRAIN_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpus[r]), Where(r, gpus[r]));
    cudaStream_t stream = nullptr;
    // Non-blocking: the legacy default stream, which LibTorch's kernels may use, must not
    // serialise with the collectives.
    DTRAIN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), Where(r, gpus[r]));
    agg->streams_.push_back(stream);
  }
  return agg;
}

NcclAggregator::~NcclAggregator() {
  DeviceRestorer restore;
  if (broken_.ok()) {
    // Finishes what is enqueued. ncclCommInitAll's ranks live in this one thread, so
    // finalising them is grouped (each rank's finalisation waits for the others').
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    (void)ncclGroupStart();
    for (ncclComm_t c : comms_) (void)ncclCommFinalize(c);
    (void)ncclGroupEnd();
#endif
    for (ncclComm_t c : comms_) (void)ncclCommDestroy(c);
  }
  for (size_t r = 0; r < streams_.size(); ++r) {
    (void)cudaSetDevice(gpus_[r]);
    (void)cudaStreamDestroy(streams_[r]);
  }
}

absl::Status NcclAggregator::Abort(absl::Status why) {
  for (ncclComm_t c : comms_) (void)ncclCommAbort(c);
  broken_ = absl::FailedPreconditionError(
      absl::StrCat("the NCCL aggregator over GPUs ", absl::StrJoin(gpus_, ","), " was aborted: ", why.message()));
  return why;
}

absl::Status NcclAggregator::CheckDevicePointers(const std::vector<ReplicaBuffers>& params) const {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].numel == 0) continue;
    for (int r = 0; r < num_replicas(); ++r) {
      const float* p = params[i].per_replica[r];
      cudaPointerAttributes attr{};
      const cudaError_t e = cudaPointerGetAttributes(&attr, p);
      if (e != cudaSuccess) (void)cudaGetLastError();
      const bool on_gpu = e == cudaSuccess && p != nullptr &&
                          (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
                          attr.device == gpus_[r];
      if (!on_gpu) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter ", i, " ", Where(r, gpus_[r]), ": the buffer is not memory of GPU ", gpus_[r],
            e != cudaSuccess
                ? absl::StrCat(" (cudaPointerGetAttributes: ", CudaText(e), ")")
                : absl::StrCat(" (memory type ", static_cast<int>(attr.type), ", device ", attr.device, ")")));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status NcclAggregator::Enqueue(Op op, const std::vector<ReplicaBuffers>& params) {
  if (!broken_.ok()) return broken_;
  DTRAIN_RETURN_IF_ERROR(CheckReplicaBuffers(params, num_replicas()));
  DTRAIN_RETURN_IF_ERROR(CheckDevicePointers(params));
  DeviceRestorer restore;
  const char* name = op == Op::kReduce ? "ncclReduce" : "ncclBroadcast";
  for (size_t i = 0; i < params.size(); ++i) {
    const ReplicaBuffers& p = params[i];
    if (p.numel == 0) continue;
    if (ncclResult_t g = ncclGroupStart(); g != ncclSuccess) return Abort(NcclError("ncclGroupStart", g));
    absl::Status first = absl::OkStatus();
    for (int r = 0; r < num_replicas() && first.ok(); ++r) {
      const size_t count = static_cast<size_t>(p.numel);
      // In place on the root (send == receive buffer); the others' receive buffer is
      // ignored by a reduce and written by a broadcast.
      const ncclResult_t res =
          op == Op::kReduce
              ? ncclReduce(p.per_replica[r], p.per_replica[r], count, ncclFloat, ncclSum, 0, comms_[r], streams_[r])
              : ncclBroadcast(p.per_replica[0], p.per_replica[r], count, ncclFloat, 0, comms_[r], streams_[r]);
      if (res != ncclSuccess) {
        first = NcclError(absl::StrCat(name, " of parameter ", i, " ", Where(r, gpus_[r])), res, comms_[r]);
      }
    }
    // The group is closed even after a failed call, so NCCL's group state is not left open.
    const ncclResult_t end = ncclGroupEnd();
    if (!first.ok()) return Abort(first);
    if (end != ncclSuccess)
      return Abort(NcclError(absl::StrCat("ncclGroupEnd after ", name, " of parameter ", i), end));
  }
  return absl::OkStatus();
}

absl::Status NcclAggregator::Reduce(const std::vector<ReplicaBuffers>& params) { return Enqueue(Op::kReduce, params); }

absl::Status NcclAggregator::Broadcast(const std::vector<ReplicaBuffers>& params) {
  return Enqueue(Op::kBroadcast, params);
}

absl::Status NcclAggregator::Wait(absl::Time deadline) {
  if (!broken_.ok()) return broken_;
  DeviceRestorer restore;
  std::vector<bool> done(gpus_.size(), false);
  absl::Duration pause = absl::Microseconds(20);
  for (;;) {
    std::vector<std::string> busy;
    for (int r = 0; r < num_replicas(); ++r) {
      if (done[r]) continue;
      // A failed peer or transport shows here, not in the stream: the kernel would spin.
      ncclResult_t async = ncclSuccess;
      if (ncclResult_t q = ncclCommGetAsyncError(comms_[r], &async); q != ncclSuccess) {
        return Abort(NcclError(absl::StrCat("ncclCommGetAsyncError ", Where(r, gpus_[r])), q, comms_[r]));
      }
      if (async != ncclSuccess && async != ncclInProgress) {
        return Abort(NcclError(absl::StrCat("NCCL collective ", Where(r, gpus_[r])), async, comms_[r]));
      }
      const cudaError_t e = cudaStreamQuery(streams_[r]);
      if (e == cudaSuccess) {
        done[r] = true;
      } else if (e == cudaErrorNotReady) {
        busy.push_back(absl::StrCat("replica ", r, " (GPU ", gpus_[r], ")"));
      } else {
        (void)cudaGetLastError();
        return Abort(CudaError(absl::StrCat("cudaStreamQuery ", Where(r, gpus_[r])), e));
      }
    }
    if (busy.empty()) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return Abort(absl::DeadlineExceededError(absl::StrCat("local aggregation over GPUs ", absl::StrJoin(gpus_, ","),
                                                            " not done by the deadline: ", absl::StrJoin(busy, ", "),
                                                            busy.size() == 1 ? " is" : " are", " still running")));
    }
    absl::SleepFor(std::min(pause, deadline - now));
    pause = std::min(pause * 2, absl::Milliseconds(1));
  }
}

}  // namespace dtrain::worker
