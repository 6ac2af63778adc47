#include "common/elastic/data_plan.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;

TEST(DataPlanTest, OneGenerationRepeatsEqualEpochs) {
  const DataPlan plan(7, 100, 10, MembershipSchedule::Fixed(2));  // 50 a worker: 5 steps an epoch
  auto p = plan.Place(12);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->epoch, 2);
  EXPECT_EQ(p->epoch_first_step, 10);
  EXPECT_EQ(p->epoch_steps, 5);
  EXPECT_EQ(p->segment_first_step, 10);
  EXPECT_EQ(plan.Place(4)->epoch, 0);
  EXPECT_EQ(plan.Place(5)->epoch, 1);
  EXPECT_EQ(plan.Place(5000000004)->epoch, 1000000000);
}

TEST(DataPlanTest, OneGenerationDealsRankRPoolElementsRModuloN) {
  // Today's Partition: rank r takes examples r, r+n, ... of the first floor(N/n)*n.
  const DataPlan plan(3, 103, 4, MembershipSchedule::Fixed(3));
  for (int64_t step = 0; step < 8; ++step) {
    for (int r = 0; r < 3; ++r) {
      const auto batch = plan.Batch(step, r);
      ASSERT_TRUE(batch.ok()) << batch.status();
      for (int64_t e : *batch) {
        EXPECT_EQ(e % 3, r);
        EXPECT_LT(e, 102);
      }
    }
  }
}

TEST(DataPlanTest, AChangeMidEpochDealsTheRestOfTheEpochAgain) {
  auto schedule = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {3, {0, 1, 3}}});
  const DataPlan plan(1, 100, 5, schedule);
  // Epoch 0: 3 steps of 2 workers use 30; the other 70 over 3 workers: 23 each, 4 steps.
  auto p = plan.Place(3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->epoch, 0);
  EXPECT_EQ(p->segment_first_step, 3);
  EXPECT_EQ(p->epoch_steps, 7);
  EXPECT_EQ(p->generation, 1);
  // Epoch 1 starts whole with 3 workers: 33 each, 6 steps.
  EXPECT_EQ(plan.Place(7)->epoch, 1);
  EXPECT_EQ(plan.Place(7)->epoch_steps, 6);
  EXPECT_EQ(plan.Place(13)->epoch, 2);
}

TEST(DataPlanTest, RefusesARankOutsideTheStepsGenerationAndTooFewExamples) {
  auto schedule = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {3, {0, 2}}});
  const DataPlan plan(1, 100, 5, schedule);
  EXPECT_TRUE(plan.Batch(2, 1).ok());
  EXPECT_THAT(plan.Batch(3, 1).status().message(),
              HasSubstr("worker 1 has no batch at step 3: it is not in generation 1 from step 3, workers {0,2}"));
  const DataPlan tiny(1, 9, 5, MembershipSchedule::Fixed(2));
  EXPECT_THAT(tiny.Place(0).status().message(), HasSubstr("9 examples leave no batch of 5 for each of the 2 workers"));
}

// A random schedule of `generations` changes between 1 and `max` workers, at steps
// up to `last_step`.
MembershipSchedule RandomSchedule(std::mt19937& rng, int max, int generations, int64_t last_step) {
  std::vector<int64_t> steps;
  std::uniform_int_distribution<int64_t> step_of(1, last_step);
  while (static_cast<int>(steps.size()) < generations - 1) {
    const int64_t s = step_of(rng);
    if (std::find(steps.begin(), steps.end(), s) == steps.end()) steps.push_back(s);
  }
  steps.push_back(0);
  std::sort(steps.begin(), steps.end());
  std::vector<Generation> gens;
  for (int64_t s : steps) {
    Generation g{s, {}};
    while (g.ranks.empty()) {
      for (int r = 0; r < max; ++r) {
        if (rng() % 2 == 0) g.ranks.push_back(r);
      }
    }
    gens.push_back(g);
  }
  return *MembershipSchedule::Create(1, max, gens);
}

TEST(DataPlanTest, EveryExampleIsUsedAtMostOnceAnEpochAndOnlyTheLastSegmentsRemainderIsLeft) {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t n = 60 + static_cast<int64_t>(rng() % 140);
    const int64_t batch = 1 + static_cast<int64_t>(rng() % 6);
    const MembershipSchedule schedule = RandomSchedule(rng, 5, 1 + static_cast<int>(rng() % 6), 60);
    const DataPlan plan(static_cast<int64_t>(rng()), n, batch, schedule);
    int64_t step = 0;
    for (int epoch = 0; epoch < 4; ++epoch) {
      auto place = plan.Place(step);
      ASSERT_TRUE(place.ok()) << place.status();
      ASSERT_EQ(place->epoch, epoch);
      ASSERT_EQ(place->epoch_first_step, step);
      std::set<int64_t> used;
      int64_t count = 0;
      std::map<int, DataPlan::SegmentShare> shares;  // per rank, of the segment being walked
      for (int64_t s = step; s < step + place->epoch_steps; ++s) {
        const int64_t segment = plan.Place(s)->segment_first_step;
        for (int r : schedule.At(s).ranks) {
          if (shares.count(r) == 0 || shares[r].place.segment_first_step != segment) {
            auto share = plan.Share(s, r);
            ASSERT_TRUE(share.ok()) << share.status();
            shares[r] = *std::move(share);
          }
          const std::vector<int64_t>& ex = shares[r].examples;
          ASSERT_LE((s - segment + 1) * batch, static_cast<int64_t>(ex.size()));
          for (int64_t i = (s - segment) * batch; i < (s - segment + 1) * batch; ++i) {
            ASSERT_GE(ex[i], 0);
            ASSERT_LT(ex[i], n);
            used.insert(ex[i]);
          }
          count += batch;
        }
      }
      const std::string where = "trial " + std::to_string(trial) + " epoch " + std::to_string(epoch);
      EXPECT_EQ(static_cast<int64_t>(used.size()), count) << where << ": an example used twice";
      // Left over: less than a batch for each of the workers that would take the next
      // step (at most 5 of them).
      EXPECT_LT(n - count, 5 * batch) << where;
      step += place->epoch_steps;
    }
  }
}

TEST(DataPlanTest, ASegmentsShareHoldsItsBatchesInOrder) {
  auto schedule = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {3, {0, 1, 3}}});
  const DataPlan plan(1, 100, 5, schedule);
  auto share = plan.Share(4, 3);
  ASSERT_TRUE(share.ok()) << share.status();
  EXPECT_EQ(share->place.segment_first_step, 3);
  EXPECT_EQ(share->examples.size(), 23u);  // 70 left over 3 workers
  for (int64_t step = 3; step < 7; ++step) {
    const std::vector<int64_t> want(share->examples.begin() + (step - 3) * 5, share->examples.begin() + (step - 2) * 5);
    EXPECT_EQ(*plan.Batch(step, 3), want);
  }
}

TEST(DataPlanTest, SeededOrderIsAPermutationFixedByItsWords) {
  const std::vector<int64_t> a = SeededOrder(50, {7, 0, 1});
  EXPECT_EQ(a, SeededOrder(50, {7, 0, 1}));
  EXPECT_NE(a, SeededOrder(50, {7, 0, 1, 3}));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(DataPlanTest, EpochFirstStepFollowsTheChanges) {
  // 100 examples, batch 10: 2 workers take 5 steps an epoch, 3 workers 3 (90 used).
  const DataPlan fixed(7, 100, 10, MembershipSchedule::Fixed(2));
  EXPECT_EQ(*fixed.EpochFirstStep(0), 0);
  EXPECT_EQ(*fixed.EpochFirstStep(3), 15);
  const DataPlan grown(7, 100, 10, *MembershipSchedule::Create(2, 3, {{0, {0, 1}}, {5, {0, 1, 2}}}));
  EXPECT_EQ(*grown.EpochFirstStep(1), 5);
  EXPECT_EQ(*grown.EpochFirstStep(2), 8);
  EXPECT_EQ(*grown.EpochFirstStep(4), 14);
}

// The draws go by a worker's place in its generation, not its number: workers {0,2}
// and a resumed job's {0,1} from an epoch's start train on the same batches.
TEST(DataPlanTest, ARenumberedGenerationDrawsTheSameBatches) {
  const MembershipSchedule saved = *MembershipSchedule::Create(2, 3, {{0, {0, 1, 2}}, {2, {0, 2}}});
  const DataPlan before(7, 120, 10, saved);
  const int64_t t = *before.EpochFirstStep(2);
  const DataPlan after(7, 120, 10, saved.ResumedAt(t));
  for (int64_t step = t; step < t + 12; ++step) {
    EXPECT_EQ(*before.Batch(step, 0), *after.Batch(step, 0)) << step;
    EXPECT_EQ(*before.Batch(step, 2), *after.Batch(step, 1)) << step;
  }
  EXPECT_EQ(*after.EpochFirstStep(2), t);
}

// A joiner removed before its first step leaves its generation zero-length: the plan
// is the one of the schedule without it, with every step placed in the generation that
// merges it (never the zero-length one).
TEST(DataPlanTest, AZeroLengthGenerationDealsNothing) {
  const MembershipSchedule with = *MembershipSchedule::Create(1, 3, {{0, {0, 1}}, {3, {0, 1, 2}}, {3, {0, 1}}});
  const MembershipSchedule without = *MembershipSchedule::Create(1, 3, {{0, {0, 1}}, {3, {0, 1}}});
  const DataPlan a(5, 100, 10, with);
  const DataPlan b(5, 100, 10, without);
  for (int64_t step = 0; step < 14; ++step) {
    auto pa = a.Place(step);
    auto pb = b.Place(step);
    ASSERT_TRUE(pa.ok() && pb.ok()) << step;
    EXPECT_NE(pa->generation, 1) << step;
    EXPECT_EQ(pa->generation, pb->generation == 0 ? 0 : 2) << step;
    EXPECT_EQ(pa->epoch, pb->epoch) << step;
    EXPECT_EQ(pa->epoch_steps, pb->epoch_steps) << step;
    EXPECT_EQ(pa->segment_first_step, pb->segment_first_step) << step;
    for (int r : {0, 1}) EXPECT_EQ(*a.Batch(step, r), *b.Batch(step, r)) << step << " " << r;
    EXPECT_THAT(a.Batch(step, 2).status().message(), HasSubstr("worker 2 has no batch")) << step;
  }
  EXPECT_EQ(*a.EpochFirstStep(2), *b.EpochFirstStep(2));
}

}  // namespace
}  // namespace dtrain::elastic
