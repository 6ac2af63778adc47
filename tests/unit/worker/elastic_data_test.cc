// A job with one generation {0 .. n-1} trains on the same examples whether its batches
// come from today's pick (Partition, EpochOrder) or from the elastic data plan: the
// trainer uses the plan only for elastic jobs, and an elastic job that never changes
// sees today's batches.
#include "services/worker/elastic_data.h"

#include "gtest/gtest.h"
#include "services/worker/dataset.h"
#include "tests/unit/worker/fake_cluster_elastic.h"

namespace dtrain::worker {
namespace {

TEST(ElasticDataTest, OneGenerationPicksTheExamplesOfTodaysPartitionAndOrder) {
  constexpr int64_t kExamples = 103, kBatch = 4, kSeed = 7;
  // Labels 0..N-1: a partition's label is the example's index in the whole set.
  TensorSet all{torch::zeros({kExamples, 1, 1, 1}), torch::arange(kExamples, torch::kInt64)};
  for (int n : {1, 2, 3}) {
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    for (int r = 0; r < n; ++r) {
      const TensorSet share = Partition(all, r, n);
      const int64_t batches = share.size() / kBatch;
      ElasticSteps steps(r, kSeed, kExamples, kBatch, testing::MakeMembership(n, n, {{0, ranks}}), nullptr);
      const PickBatch elastic = ElasticBatches(steps);
      for (int64_t epoch = 0; epoch < 2; ++epoch) {
        const PickBatch fixed = FixedEpochBatches(share.size(), kBatch, kSeed, epoch, r);
        const EpochSpan span = *steps.SpanFrom(epoch * batches);
        EXPECT_EQ(span.epoch, epoch);
        EXPECT_EQ(span.batches, batches);
        for (int64_t b = 0; b < batches; ++b) {
          const int64_t step = epoch * batches + b;
          const torch::Tensor today = share.labels.index_select(0, *fixed(step, b));
          const torch::Tensor planned = *elastic(step, b);
          EXPECT_TRUE(torch::equal(today, planned)) << n << " workers, rank " << r << ", step " << step;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dtrain::worker
