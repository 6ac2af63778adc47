#include "services/worker/elastic_data.h"

#include <vector>

#include "common/status_macros.h"
#include "services/worker/dataset.h"

namespace dtrain::worker {

PickBatch FixedEpochBatches(int64_t share_size, int64_t batch_size, int64_t seed, int64_t epoch, int rank) {
  const torch::Tensor order = torch::tensor(EpochOrder(share_size, seed, epoch, rank), torch::kInt64);
  return [order, batch_size](int64_t /*step*/, int64_t batch) -> absl::StatusOr<torch::Tensor> {
    return order.narrow(0, batch * batch_size, batch_size);
  };
}

PickBatch ElasticBatches(ElasticSteps& steps) {
  return [&steps](int64_t step, int64_t /*batch*/) -> absl::StatusOr<torch::Tensor> {
    DTRAIN_ASSIGN_OR_RETURN(const std::vector<int64_t> examples, steps.Batch(step));
    return torch::tensor(examples, torch::kInt64);
  };
}

}  // namespace dtrain::worker
