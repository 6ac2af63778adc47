// An elastic worker's steps without LibTorch's training: which examples each step takes
// (ElasticSteps over the DataPlan), the generation its pushes carry, and what a step
// refused "membership changed" leads to (NextSpan: a redo in the same epoch, an epoch
// that ends at the refused step, or leaving the job), and a joiner's first step.
#include "services/worker/elastic_steps.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/epoch_spans.h"
#include "services/worker/kv/local_kvstore.h"
#include "tests/unit/worker/fake_cluster_elastic.h"

namespace dtrain::worker {
namespace {

using testing::FakeClusterElastic;
using testing::MakeMembership;

constexpr int64_t kSeed = 7, kExamples = 100, kBatch = 4;

class RecordingTag final : public ElasticPart {
 public:
  void SetMembershipGeneration(int generation) override { generation_ = generation; }
  int membership_generation() const override { return generation_; }

 private:
  int generation_ = -1;
};

const elastic::Membership kTwo = MakeMembership(1, 4, {{0, {0, 1}}});

TEST(PlanRedoTest, TheGenerationThatHoldsTheStepDecidesAndARankNotInItLeaves) {
  const elastic::MembershipSchedule s = MakeMembership(1, 4, {{0, {0, 1}}, {5, {0, 1, 2}}, {9, {0, 2}}}).schedule;
  RedoPlan redo = PlanRedo(s, 1, 5);
  EXPECT_EQ(redo.step, 5);
  EXPECT_EQ(redo.generation, 1);
  EXPECT_EQ(redo.workers, 3);
  EXPECT_FALSE(redo.left);
  redo = PlanRedo(s, 1, 9);
  EXPECT_EQ(redo.generation, 2);
  EXPECT_TRUE(redo.left);
  EXPECT_FALSE(PlanRedo(s, 2, 9).left);
}

TEST(ElasticStepsTest, EachStepsBatchIsTheDataPlansAndTagsItsGeneration) {
  const elastic::Membership m = MakeMembership(1, 4, {{0, {0, 1}}, {5, {0, 1, 2}}});
  const elastic::DataPlan plan(kSeed, kExamples, kBatch, m.schedule);
  RecordingTag tag;
  ElasticSteps steps(1, kSeed, kExamples, kBatch, m, &tag);
  for (int64_t step = 0; step < 30; ++step) {
    absl::StatusOr<std::vector<int64_t>> got = steps.Batch(step);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *plan.Batch(step, 1)) << "step " << step;
    EXPECT_EQ(tag.membership_generation(), step < 5 ? 0 : 1);
  }
  // A rank the step's generation does not hold has no batch there: it leaves at that step.
  ElasticSteps outsider(3, kSeed, kExamples, kBatch, m, &tag);
  EXPECT_TRUE(IsMembershipChanged(outsider.Batch(0).status()));
  EXPECT_EQ(MembershipChangedStep(outsider.Batch(0).status()), 0);
}

// A leave committed right after a join: the membership the worker took while redoing
// step 5 in the join's generation already says it is gone from step 6. Its batch of
// step 6 is refused by its own plan, and it leaves there without waiting for a newer
// membership (none would come).
TEST(ElasticStepsTest, AWorkerThatKnowsItIsGoneFromAStepLeavesThereWithoutWaiting) {
  const elastic::Membership next = MakeMembership(1, 4, {{0, {0, 1}}, {5, {0, 1, 2}}, {6, {0, 2}}});
  FakeClusterElastic cluster(kTwo);
  RecordingTag tag;
  ElasticSteps steps(1, kSeed, kExamples, kBatch, kTwo, &tag);
  ASSERT_TRUE(steps.Batch(4).ok());
  cluster.Heartbeat(next);
  auto redo = steps.AfterChange(cluster, 5, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(redo.ok()) << redo.status();
  EXPECT_FALSE(redo->left);
  ASSERT_TRUE(steps.Batch(5).ok());
  const absl::Status gone = steps.Batch(6).status();
  ASSERT_TRUE(IsMembershipChanged(gone)) << gone;
  // A deadline already past: it must not wait.
  redo = steps.AfterChange(cluster, MembershipChangedStep(gone), absl::Now());
  ASSERT_TRUE(redo.ok()) << redo.status();
  EXPECT_TRUE(redo->left);
  EXPECT_EQ(redo->step, 6);
}

// Rank `rank` ran `kTwo` and its push of step `step` was refused; the scheduler's
// heartbeat brought `next`.
struct Refused {
  Refused(int rank, const elastic::Membership& next, int64_t step)
      : cluster(kTwo), steps(rank, kSeed, kExamples, kBatch, kTwo, &tag), kv(KVStoreMode::kLocal) {
    cluster.Heartbeat(next);
    span = *steps.SpanFrom(step);
    span.first_batch = 0;  // the epoch ran from its start up to the refused step
    status = NextSpan(MembershipChangedStatus(step, "membership changed from step ..."), absl::Seconds(5), kv, &cluster,
                      &steps, 12, &span, &epoch_over, &left_at);
  }
  FakeClusterElastic cluster;
  RecordingTag tag;
  ElasticSteps steps;
  LocalKVStore kv;
  EpochSpan span;
  bool epoch_over = false;
  int64_t left_at = -1;
  absl::Status status;
};

TEST(TallyEpochTest, AnEpochCountsEveryWorkersBatchesOfEachGenerationAndNamesTheLastOnesLowestRank) {
  // Steps 0..4 with 2 workers take 40 of the 100 examples; the 60 left deal 20 to each of
  // 3 workers, 5 batches: steps 5..9. Every example once.
  const elastic::Membership grow = MakeMembership(1, 4, {{0, {0, 1}}, {5, {0, 1, 2}}});
  const elastic::DataPlan plan(kSeed, kExamples, kBatch, grow.schedule);
  auto t = TallyEpoch(plan, kBatch, 7);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->samples, 100);
  EXPECT_EQ(t->workers_at_end, 3);
  EXPECT_EQ(t->lowest_rank_at_end, 0);

  // Worker 0 leaves at step 5: the line is worker 1's.
  const elastic::Membership shrink = MakeMembership(1, 4, {{0, {0, 1, 2}}, {5, {1, 2}}});
  const elastic::DataPlan plan2(kSeed, kExamples, kBatch, shrink.schedule);
  t = TallyEpoch(plan2, kBatch, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->workers_at_end, 2);
  EXPECT_EQ(t->lowest_rank_at_end, 1);
  // 5 steps of 3 workers (60), then the 40 left: 20 each, 5 steps of 2 workers.
  EXPECT_EQ(t->samples, 100);
}

TEST(NextSpanTest, ARefusedStepIsRedoneOnTheNewPlansBatchInTheSameEpoch) {
  // 100 examples, 2 workers of 4: 12 steps an epoch; from step 5 three share the 60 left.
  const elastic::Membership next = MakeMembership(1, 4, {{0, {0, 1}}, {5, {0, 1, 2}}});
  Refused r(1, next, 5);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_FALSE(r.epoch_over);
  EXPECT_EQ(r.left_at, -1);
  EXPECT_EQ(r.span.epoch, 0);
  EXPECT_EQ(r.span.first_step, 0);
  EXPECT_EQ(r.span.first_batch, 5);
  EXPECT_EQ(r.span.batches, 10) << "5 steps of 2 workers, then 60 / 3 / 4 = 5 of 3";
  EXPECT_EQ(r.tag.membership_generation(), 1);
  const elastic::DataPlan plan(kSeed, kExamples, kBatch, next.schedule);
  EXPECT_EQ(*r.steps.Batch(5), *plan.Batch(5, 1));
}

TEST(NextSpanTest, ARankThatTheNewGenerationDoesNotHoldLeavesAtTheRefusedStep) {
  const elastic::Membership next = MakeMembership(1, 4, {{0, {0, 1}}, {5, {0}}});
  Refused leaver(1, next, 5);
  ASSERT_TRUE(leaver.status.ok()) << leaver.status;
  EXPECT_EQ(leaver.left_at, 5);
  Refused stays(0, next, 5);
  ASSERT_TRUE(stays.status.ok()) << stays.status;
  EXPECT_EQ(stays.left_at, -1);
  EXPECT_EQ(stays.span.batches, 5 + 60 / 1 / 4);
}

TEST(NextSpanTest, AnEpochThatTheNewWorkersCannotGoOnWithEndsAtTheRefusedStep) {
  // At step 11, 12 examples are left: none for four workers of 4.
  const elastic::Membership next = MakeMembership(1, 4, {{0, {0, 1}}, {11, {0, 1, 2, 3}}});
  Refused r(0, next, 11);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.epoch_over);
  EXPECT_EQ(r.span.epoch, 0);
  EXPECT_EQ(r.span.first_step + r.span.batches, 11) << "EndEpoch settles at the refused step";
  const EpochSpan after = *r.steps.SpanFrom(11);
  EXPECT_EQ(after.epoch, 1);
  EXPECT_EQ(after.first_step, 11);
}

TEST(NextSpanTest, NoNewMembershipWithinTheSyncTimeoutNamesTheGenerationAwaited) {
  FakeClusterElastic cluster(kTwo);
  RecordingTag tag;
  ElasticSteps steps(0, kSeed, kExamples, kBatch, kTwo, &tag);
  LocalKVStore kv(KVStoreMode::kLocal);
  EpochSpan span = *steps.SpanFrom(5);
  bool over = false;
  int64_t left = -1;
  const absl::Status s = NextSpan(MembershipChangedStatus(5, "membership changed"), absl::Milliseconds(10), kv,
                                  &cluster, &steps, 12, &span, &over, &left);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("membership generation 1"));
}

TEST(NextSpanTest, AFixedJobsErrorsPassAndItsEpochsFollowEachOther) {
  LocalKVStore kv(KVStoreMode::kLocal);
  EpochSpan span = SpanOf(StepPlan{2, 3, -1, false}, 12);
  EXPECT_EQ(span.first_step, 24);
  EXPECT_EQ(span.first_batch, 3);
  bool over = false;
  int64_t left = -1;
  EXPECT_EQ(
      NextSpan(absl::InternalError("diverged"), absl::Seconds(1), kv, nullptr, nullptr, 12, &span, &over, &left).code(),
      absl::StatusCode::kInternal);
  ASSERT_TRUE(NextSpan(absl::OkStatus(), absl::Seconds(1), kv, nullptr, nullptr, 12, &span, &over, &left).ok());
  EXPECT_TRUE(over);
  // A membership change in a job without an elastic part is an error like any other.
  EXPECT_TRUE(IsMembershipChanged(
      NextSpan(MembershipChangedStatus(3, "x"), absl::Seconds(1), kv, nullptr, nullptr, 12, &span, &over, &left)));
}

TEST(AwaitJoinStepTest, AJoinerStartsAtTheStepOfTheFirstGenerationThatHoldsIt) {
  FakeClusterElastic cluster(kTwo, /*joiner=*/true);
  EXPECT_EQ(AwaitJoinStep(cluster, 2, absl::Now() + absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  cluster.Heartbeat(MakeMembership(1, 4, {{0, {0, 1}}, {180, {0, 1, 2}}}));
  absl::StatusOr<int64_t> step = AwaitJoinStep(cluster, 2, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 180);
}

// Rank 2 was a joiner removed before its first step (generation 1, zero-length): a new
// joiner given rank 2 starts with its own generation, not that one.
TEST(AwaitJoinStepTest, AJoinerGivenARankHeldBeforeStartsAtItsOwnGeneration) {
  const elastic::Membership before = MakeMembership(1, 4, {{0, {0, 1}}, {7, {0, 1, 2}}, {7, {0, 1}}});
  FakeClusterElastic cluster(before, /*joiner=*/true);
  EXPECT_EQ(AwaitJoinStep(cluster, 2, absl::Now() + absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  cluster.Heartbeat(MakeMembership(1, 4, {{0, {0, 1}}, {7, {0, 1, 2}}, {7, {0, 1}}, {30, {0, 1, 2}}}));
  absl::StatusOr<int64_t> step = AwaitJoinStep(cluster, 2, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 30);
}

}  // namespace
}  // namespace dtrain::worker
