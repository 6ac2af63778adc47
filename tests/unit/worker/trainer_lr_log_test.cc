// "Update[N]: Change learning rate to X" exactly where the servers' schedule changes it.
#include "services/worker/trainer_lr_log.h"

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

TEST(LrChangeLogTest, SaysMxnetsLineAtTheStepsTheServersChangeTheRate) {
  kv::OptimizerOptions o;
  o.learning_rate = 0.1;
  o.lr_factor = 0.5;
  o.lr_steps = {10, 20};  // updates of a key: epochs 1 and 2 at 10 batches
  const LrChangeLog log(o, 1);
  EXPECT_EQ(log.LineForStep(0), "");
  EXPECT_EQ(log.LineForStep(9), "");
  // MXNet's MultiFactorScheduler logs num_update (1-based) with "%0.5e".
  EXPECT_EQ(log.LineForStep(10), "Update[11]: Change learning rate to 5.00000e-02");
  EXPECT_EQ(log.LineForStep(11), "");
  EXPECT_EQ(log.LineForStep(20), "Update[21]: Change learning rate to 2.50000e-02");
}

TEST(LrChangeLogTest, AsyncCountsEveryWorkersUpdates) {
  kv::OptimizerOptions o;
  o.learning_rate = 0.1;
  o.lr_factor = 0.1;
  o.lr_steps = {20};  // 10 steps x 2 workers
  const LrChangeLog log(o, 2);
  EXPECT_EQ(log.LineForStep(9), "");
  EXPECT_EQ(log.LineForStep(10), "Update[21]: Change learning rate to 1.00000e-02");
}

TEST(LrChangeLogTest, AConstantRateSaysNothing) {
  kv::OptimizerOptions o;
  o.lr_steps = {5};
  o.lr_factor = 1.0;
  EXPECT_EQ(LrChangeLog(o, 1).LineForStep(5), "");
}

// An elastic job's epochs have the lengths its membership gives them: the line comes at
// each listed epoch's first step, with the rate the servers apply there.
TEST(LrChangeLogTest, AnElasticJobsEpochStepsSayTheLineAtTheEpochsFirstStep) {
  kv::OptimizerOptions o;
  o.learning_rate = 0.05;
  o.lr_factor = 0.3;
  EXPECT_EQ(LrChangeLog::LineForEpoch(o, {1, 2}, 1, 15), "Update[16]: Change learning rate to 1.50000e-02");
  EXPECT_EQ(LrChangeLog::LineForEpoch(o, {1, 2}, 2, 27), "Update[28]: Change learning rate to 4.50000e-03");
  EXPECT_EQ(LrChangeLog::LineForEpoch(o, {1, 2}, 0, 0), "");
  EXPECT_EQ(LrChangeLog::LineForEpoch(o, {1, 2}, 3, 40), "");
}

}  // namespace
}  // namespace dtrain::worker
