// StallAdvisor: pauses of other workers (long blocked steps among short ones) lead to the
// staleness that covers them; steady slowness, single hiccups and modes that never wait
// lead to nothing.
#include "services/worker/stall_advice.h"

#include <gtest/gtest.h>

namespace dtrain::worker {
namespace {

// `steps` steps of 20 ms compute and 2 ms blocked, every `every`-th blocked `pause` s more.
StallAdvisor Steps(int steps, int every, double pause) {
  StallAdvisor a;
  for (int i = 0; i < steps; ++i) a.StepDone(0.020, 0.002 + (every > 0 && i % every == every - 1 ? pause : 0.0));
  return a;
}

TEST(StallAdviceTest, PausesInDistSyncAdviseAStalenessCoveringThreeQuartersOfThem) {
  // 0.6 s pauses every 50 steps: 28 steps of 22 ms, 29 with the step it stalls in; 60 s of
  // training, 12 s of stalls. 3/4 of 29 steps, rounded up: 22.
  const std::optional<std::string> advice = Steps(1000, 50, 0.6).Advice(KVStoreMode::kDistSync, 0);
  ASSERT_TRUE(advice.has_value());
  EXPECT_NE(advice->find("in 20 stalls"), std::string::npos) << *advice;
  EXPECT_NE(advice->find("28 steps of 22.0 ms"), std::string::npos) << *advice;
  EXPECT_NE(advice->find("--kv-store dist_ssp --staleness 22 lets the others go on through 22 of such a pause's 29"),
            std::string::npos)
      << *advice;
}

TEST(StallAdviceTest, UnderDistSspThePauseIsTheStalenessPlusTheStall) {
  // Stalls of 0.2 s (10 steps, 11 with their own) beyond a staleness of 3: pauses of 14
  // steps, of which 3/4 is 11 (rounded up).
  const std::optional<std::string> advice = Steps(1000, 50, 0.2).Advice(KVStoreMode::kDistSsp, 3);
  ASSERT_TRUE(advice.has_value());
  EXPECT_NE(advice->find("beyond --staleness 3; --staleness 11 lets the others go on through 11 of such a pause's 14"),
            std::string::npos)
      << *advice;
  // A staleness that covers 3/4 of the pause already (40 of 51 steps) gets no advice:
  // the stalls are the quarter left uncovered on purpose.
  EXPECT_FALSE(Steps(1000, 50, 0.2).Advice(KVStoreMode::kDistSsp, 40).has_value());
  // Just past 3/4 (37 of 48, where 3/4 is 36) is no advice either; short of it (30 of 41,
  // where 3/4 is 31) is.
  EXPECT_FALSE(Steps(1000, 50, 0.2).Advice(KVStoreMode::kDistSsp, 37).has_value());
  const std::optional<std::string> more = Steps(1000, 50, 0.2).Advice(KVStoreMode::kDistSsp, 30);
  ASSERT_TRUE(more.has_value());
  EXPECT_NE(more->find("--staleness 31 lets"), std::string::npos) << *more;
}

// Under --no-weigh-stale stale pushes count in full, and the advice says so rather than
// that they count less.
TEST(StallAdviceTest, WithoutWeighingTheAdviceSaysStalePushesCountInFull) {
  const std::optional<std::string> weighed = Steps(1000, 50, 0.2).Advice(KVStoreMode::kDistSsp, 3, true);
  const std::optional<std::string> full = Steps(1000, 50, 0.2).Advice(KVStoreMode::kDistSsp, 3, false);
  ASSERT_TRUE(weighed.has_value());
  ASSERT_TRUE(full.has_value());
  EXPECT_NE(weighed->find("count less by how stale"), std::string::npos) << *weighed;
  EXPECT_EQ(full->find("count less"), std::string::npos) << *full;
  EXPECT_NE(full->find("--staleness 11 lets the others go on through 11 of such a pause's 14 steps (with "
                       "--no-weigh-stale their pushes from stale weights count in full"),
            std::string::npos)
      << *full;
}

TEST(StallAdviceTest, NothingToSayWithoutPausesOrForFewOrInModesThatDoNotWait) {
  EXPECT_FALSE(Steps(1000, 0, 0).Advice(KVStoreMode::kDistSync, 0).has_value());      // steady
  EXPECT_FALSE(Steps(1000, 400, 0.6).Advice(KVStoreMode::kDistSync, 0).has_value());  // two hiccups
  EXPECT_FALSE(Steps(1000, 50, 0.03).Advice(KVStoreMode::kDistSync, 0).has_value());  // short: under 3 steps
  EXPECT_FALSE(Steps(1000, 50, 0.6).Advice(KVStoreMode::kDistAsync, 0).has_value());  // never waits for others
  EXPECT_FALSE(Steps(1000, 50, 0.6).Advice(KVStoreMode::kLocal, 0).has_value());
  EXPECT_FALSE(StallAdvisor().Advice(KVStoreMode::kDistSync, 0).has_value());  // no steps
}

TEST(StallAdviceTest, OnlyTheLastWindowOfStepsCounts) {
  // Pauses early in a long run, then a window's worth of steady steps: they have rolled out.
  StallAdvisor a = Steps(1000, 50, 0.6);
  ASSERT_TRUE(a.Advice(KVStoreMode::kDistSync, 0).has_value());
  for (size_t i = 0; i < StallAdvisor::kWindowSteps; ++i) a.StepDone(0.020, 0.002);
  EXPECT_FALSE(a.Advice(KVStoreMode::kDistSync, 0).has_value());
}

TEST(StallAdviceTest, UniformlySlowStepsAreNotStalls) {
  // Every step blocked 0.5 s (a slow network): the median absorbs it, nothing stands out.
  StallAdvisor a;
  for (int i = 0; i < 200; ++i) a.StepDone(0.02, 0.5);
  EXPECT_FALSE(a.Advice(KVStoreMode::kDistSync, 0).has_value());
}

}  // namespace
}  // namespace dtrain::worker
