// What the worker's --gpus asks of its LibTorch and its devices, checked when the worker
// starts, before it joins the job, so that a CPU-only build or a missing GPU fails at once
// and by name instead of after the others have waited for this worker.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/worker/kv/local_aggregator.h"

namespace dtrain::worker {

// OK for no GPUs. FAILED_PRECONDITION when LibTorch was built without CUDA ("--gpus 0:
// this worker's LibTorch has no CUDA (torch::cuda::is_available() is false)") or a GPU is
// beyond torch::cuda::device_count().
absl::Status CheckGpusForTorch(const std::vector<int>& gpus);

// The devices a worker's model replicas live on and the aggregation over them. Empty
// (no devices, no aggregator): the worker trains its one host model, as without --gpus.
struct WorkerDevices {
  std::vector<torch::Device> devices;  // replica r on devices[r]
  std::unique_ptr<LocalAggregator> aggregator;
  std::string description;  // "GPUs 0,1", "the CPU (--cpu-replicas 2)"; for the log
};

// --gpus (ordinals) or --cpu-replicas (a count; the same path on CPU devices, for tests),
// at most one of them non-empty. GPUs are checked (CheckGpusForTorch) and the NCCL
// communicator over them made (MakeLocalAggregator), so the devices and NCCL are proven
// before the worker joins; its errors are prefixed with the flag. With GPUs, cuDNN's
// autotuner is turned off and its deterministic algorithms chosen (and cuBLAS's workspace
// fixed), so that a step redone after a failure gives the same bits. Neither: empty.
absl::StatusOr<WorkerDevices> PrepareDevices(const std::vector<int>& gpus, int cpu_replicas);

}  // namespace dtrain::worker
