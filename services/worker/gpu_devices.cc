#include "services/worker/gpu_devices.h"

#include <ATen/Context.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/worker/kv/local_aggregator_factory.h"

namespace dtrain::worker {

absl::Status CheckGpusForTorch(const std::vector<int>& gpus) {
  if (gpus.empty()) return absl::OkStatus();
  const std::string flag = absl::StrCat("--gpus ", absl::StrJoin(gpus, ","));
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": this worker's LibTorch has no CUDA (torch::cuda::is_available() is false)"));
  }
  const size_t count = torch::cuda::device_count();
  for (int g : gpus) {
    if (g < 0 || static_cast<size_t>(g) >= count) {
      return absl::FailedPreconditionError(
          absl::StrCat(flag, ": GPU ", g, " does not exist: LibTorch sees ", count, " CUDA device(s)"));
    }
  }
  return absl::OkStatus();
}

namespace {

// Recovery is exact only if a redone step computes the same gradient bits as the first try,
// and workers of dist_device_sync agree only if the same batch gives the same bits on each.
// cuDNN's autotuner may pick another convolution algorithm each run, and some of its
// algorithms (and cuBLAS with a varying workspace) accumulate in a varying order: pin both.
// Set before the first CUDA kernel: cuBLAS reads its variable when its handle is made.
void MakeGpuKernelsDeterministic() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setBenchmarkCuDNN(false);
  at::globalContext().setDeterministicCuDNN(true);
}

}  // namespace

absl::StatusOr<WorkerDevices> PrepareDevices(const std::vector<int>& gpus, int cpu_replicas) {
  WorkerDevices out;
  if (!gpus.empty() && cpu_replicas > 0) {
    return absl::InvalidArgumentError("--cpu-replicas cannot be combined with --gpus");
  }
  if (cpu_replicas > 0) {
    out.devices.assign(cpu_replicas, torch::Device(torch::kCPU));
    out.aggregator = std::make_unique<CpuAggregator>(cpu_replicas);
    out.description = absl::StrCat("the CPU (--cpu-replicas ", cpu_replicas, ")");
    return out;
  }
  if (gpus.empty()) return out;
  if (absl::Status s = CheckGpusForTorch(gpus); !s.ok()) return s;
  MakeGpuKernelsDeterministic();
  const std::string flag = absl::StrCat("--gpus ", absl::StrJoin(gpus, ","));
  absl::StatusOr<std::unique_ptr<LocalAggregator>> agg = MakeLocalAggregator(gpus);
  if (!agg.ok()) return absl::Status(agg.status().code(), absl::StrCat(flag, ": ", agg.status().message()));
  out.aggregator = *std::move(agg);
  for (int g : gpus) out.devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(g));
  out.description = absl::StrCat("GPU", gpus.size() == 1 ? " " : "s ", absl::StrJoin(gpus, ","));
  return out;
}

}  // namespace dtrain::worker
