// The elastic data plan with one generation {0 .. n-1} gives exactly the batches the
// trainer takes today (Partition, then EpochOrder, batch b at [bB, (b+1)B)), so a job
// that never changes trains on the same examples in the same order.
#include <vector>

#include "common/elastic/data_plan.h"
#include "gtest/gtest.h"
#include "services/worker/dataset.h"

namespace dtrain::worker {
namespace {

TEST(ElasticDataPlanCompatTest, OneGenerationIsTodaysPartitionAndEpochOrder) {
  for (int n : {1, 2, 3}) {
    const int64_t examples = 103, batch = 4, seed = 7;
    const elastic::DataPlan plan(seed, examples, batch, elastic::MembershipSchedule::Fixed(n));
    const int64_t per_worker = examples / n;
    const int64_t batches = per_worker / batch;
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      for (int r = 0; r < n; ++r) {
        const std::vector<int64_t> order = EpochOrder(per_worker, seed, epoch, r);
        EXPECT_EQ(order, elastic::SeededOrder(per_worker, {static_cast<uint64_t>(seed), static_cast<uint64_t>(epoch),
                                                           static_cast<uint64_t>(r)}));
        for (int64_t b = 0; b < batches; ++b) {
          const int64_t step = epoch * batches + b;
          auto got = plan.Batch(step, r);
          ASSERT_TRUE(got.ok()) << got.status();
          std::vector<int64_t> today(batch);
          // Partition: the worker's i-th example is example r + i*n of the whole set.
          for (int64_t i = 0; i < batch; ++i) today[i] = r + n * order[b * batch + i];
          EXPECT_EQ(*got, today) << n << " workers, rank " << r << ", step " << step;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dtrain::worker
