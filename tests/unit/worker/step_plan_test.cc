// PlanSteps: where training starts for a fresh run, a resume from a checkpoint, and a
// replacement of a dead worker mid-epoch or at an epoch's first step; PlanRollback:
// where it starts again after a rollback.
#include "services/worker/step_plan.h"

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

TEST(StepPlanTest, AFreshRunStartsAtTheFirstBatchOfItsEpoch) {
  const StepPlan fresh = PlanSteps(0, -1, 47);
  EXPECT_EQ(fresh.first_epoch, 0);
  EXPECT_EQ(fresh.first_batch, 0);
  EXPECT_EQ(fresh.resume_step, -1);
  EXPECT_FALSE(fresh.redo_epoch_end);
  const StepPlan loaded = PlanSteps(3, -1, 47);  // --load-epoch 3
  EXPECT_EQ(loaded.first_epoch, 3);
  EXPECT_EQ(loaded.first_batch, 0);
  EXPECT_FALSE(loaded.redo_epoch_end) << "a checkpoint's epoch end was completed when it was saved";
}

TEST(StepPlanTest, AReplacementRedoesTheUnfinishedStep) {
  const StepPlan mid = PlanSteps(0, 2 * 47 + 5, 47);
  EXPECT_EQ(mid.first_epoch, 2);
  EXPECT_EQ(mid.first_batch, 5);
  EXPECT_EQ(mid.resume_step, 99);
  EXPECT_FALSE(mid.redo_epoch_end);
}

TEST(StepPlanTest, AReplacementAtAnEpochsFirstStepRedoesThePreviousEpochsEnd) {
  const StepPlan at_start = PlanSteps(0, 2 * 47, 47);
  EXPECT_EQ(at_start.first_epoch, 2);
  EXPECT_EQ(at_start.first_batch, 0);
  EXPECT_TRUE(at_start.redo_epoch_end);
  // The very first step of the run (or of the epoch resumed from) has no epoch end before it.
  EXPECT_FALSE(PlanSteps(0, 0, 47).redo_epoch_end);
  EXPECT_FALSE(PlanSteps(3, 3 * 47, 47).redo_epoch_end);
  EXPECT_TRUE(PlanSteps(3, 4 * 47, 47).redo_epoch_end);
}

TEST(StepPlanTest, ARollbackGoesOnAtTheStepRolledBackToWithoutRedoingAnEpochEnd) {
  const StepPlan mid = PlanRollback(2 * 47 + 5, 47);
  EXPECT_EQ(mid.first_epoch, 2);
  EXPECT_EQ(mid.first_batch, 5);
  EXPECT_EQ(mid.resume_step, 99);
  EXPECT_FALSE(mid.redo_epoch_end);
  const StepPlan at_start = PlanRollback(2 * 47, 47);
  EXPECT_EQ(at_start.first_epoch, 2);
  EXPECT_EQ(at_start.first_batch, 0);
  EXPECT_FALSE(at_start.redo_epoch_end) << "every worker finished epoch 1's end before step 94 merged";
}

}  // namespace
}  // namespace dtrain::worker
