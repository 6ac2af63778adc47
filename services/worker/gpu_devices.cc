#include "services/worker/gpu_devices.h"

#include <torch/cuda.h>

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
      return absl::FailedPreconditionError(absl::StrCat(flag, ": GPU ", g, " does not exist: LibTorch sees ", count,
                                                        " CUDA device(s)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LocalAggregator>> PrepareGpus(const std::vector<int>& gpus) {
  if (gpus.empty()) return MakeLocalAggregator(gpus);
  if (absl::Status s = CheckGpusForTorch(gpus); !s.ok()) return s;
  const std::string flag = absl::StrCat("--gpus ", absl::StrJoin(gpus, ","));
  absl::StatusOr<std::unique_ptr<LocalAggregator>> agg = MakeLocalAggregator(gpus);
  if (!agg.ok()) return absl::Status(agg.status().code(), absl::StrCat(flag, ": ", agg.status().message()));
  return absl::UnimplementedError(absl::StrCat(
      flag, ": LibTorch sees ", torch::cuda::device_count(), " CUDA device(s) and the NCCL communicator over them "
      "was made, but the trainer does not place model replicas on GPUs yet (docs/gpu.md)"));
}

}  // namespace dtrain::worker
