// What the worker's --gpus asks of its LibTorch and its devices, checked when the worker
// starts, before it joins the job, so that a CPU-only build or a missing GPU fails at once
// and by name instead of after the others have waited for this worker.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/worker/kv/local_aggregator.h"

namespace dtrain::worker {

// OK for no GPUs. FAILED_PRECONDITION when LibTorch was built without CUDA ("--gpus 0:
// this worker's LibTorch has no CUDA (torch::cuda::is_available() is false)") or a GPU is
// beyond torch::cuda::device_count().
absl::Status CheckGpusForTorch(const std::vector<int>& gpus);

// The worker's local aggregation for --gpus: a CpuAggregator for none. For GPUs it checks
// them (CheckGpusForTorch), makes the NCCL communicator over them (MakeLocalAggregator, so
// the devices and NCCL are proven at start), and then answers UNIMPLEMENTED: the trainer
// does not place model replicas on GPUs yet (docs/gpu.md says what exists).
absl::StatusOr<std::unique_ptr<LocalAggregator>> PrepareGpus(const std::vector<int>& gpus);

}  // namespace dtrain::worker
