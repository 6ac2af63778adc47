// Which LocalAggregator a worker gets for its --gpus: the one place that knows whether
// this build has NCCL (DTRAIN_WITH_NCCL, from -DDTRAIN_CUDA; see docs/gpu.md).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "services/worker/kv/local_aggregator.h"

namespace dtrain::worker {

// True when this dtrain was built with the NCCL aggregator.
bool BuiltWithNccl();

// No GPUs: a CpuAggregator with one replica (the CPU is the worker's one device). GPUs:
// an NcclAggregator over them (its errors: nccl_aggregator.h), or, in a build without
// NCCL, FAILED_PRECONDITION saying so.
absl::StatusOr<std::unique_ptr<LocalAggregator>> MakeLocalAggregator(const std::vector<int>& gpus);

}  // namespace dtrain::worker
