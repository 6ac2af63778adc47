// Each step's examples as the trainer indexes its training tensors: for a fixed job its
// Partition share in EpochOrder (batch b at [bB, (b+1)B)), for an elastic job the
// DataPlan's (ElasticSteps, indices into the whole training set). With one generation
// {0 .. n-1} both pick the same examples (elastic_data_test.cc).
#pragma once

#include <cstdint>
#include <functional>

#include <torch/torch.h>

#include "absl/status/statusor.h"
#include "services/worker/elastic_steps.h"

namespace dtrain::worker {

// The examples of step `step`, batch `batch` of its epoch: int64 indices.
using PickBatch = std::function<absl::StatusOr<torch::Tensor>(int64_t step, int64_t batch)>;

// A fixed job's epoch `epoch` over this rank's share of `share_size` examples.
PickBatch FixedEpochBatches(int64_t share_size, int64_t batch_size, int64_t seed, int64_t epoch, int rank);

// An elastic job's steps; `steps` must outlive the result.
PickBatch ElasticBatches(ElasticSteps& steps);

}  // namespace dtrain::worker
