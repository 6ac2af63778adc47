#include "common/elastic/membership_schedule.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;

TEST(MembershipScheduleTest, FixedIsOneGenerationOfEveryRankFromStepZero) {
  const MembershipSchedule s = MembershipSchedule::Fixed(3);
  ASSERT_EQ(s.generations().size(), 1u);
  EXPECT_EQ(s.At(0).ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(s.At(1000000).ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(s.min_workers(), 3);
  EXPECT_EQ(s.max_workers(), 3);
  EXPECT_EQ(s.LowestFreeRank().status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MembershipScheduleTest, EachStepHasExactlyTheGenerationStartedLastAtOrBeforeIt) {
  auto s = MembershipSchedule::Create(2, 4, {{0, {0, 1}}, {180, {0, 1, 2}}, {400, {0, 2}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->IndexAt(0), 0);
  EXPECT_EQ(s->IndexAt(179), 0);
  EXPECT_EQ(s->IndexAt(180), 1);
  EXPECT_EQ(s->IndexAt(399), 1);
  EXPECT_EQ(s->IndexAt(400), 2);
  EXPECT_EQ(s->At(5000).ranks, (std::vector<int>{0, 2}));
  // A leaver's rank is the lowest free one again.
  EXPECT_EQ(*s->LowestFreeRank(), 1);
  EXPECT_EQ(s->Describe(2), "generation 2 from step 400, workers {0,2}");
}

TEST(MembershipScheduleTest, RefusesEachBrokenRuleNamingTheField) {
  auto code_and_text = [](int lo, int hi, std::vector<Generation> g) {
    return MembershipSchedule::Create(lo, hi, std::move(g)).status();
  };
  EXPECT_THAT(code_and_text(3, 2, {{0, {0, 1}}}).message(), HasSubstr("need 1 <= MIN <= MAX"));
  EXPECT_THAT(code_and_text(0, 2, {{0, {0, 1}}}).message(), HasSubstr("need 1 <= MIN <= MAX"));
  EXPECT_THAT(code_and_text(1, 2, {}).message(), HasSubstr("at least one generation"));
  EXPECT_THAT(code_and_text(1, 2, {{5, {0}}}).message(), HasSubstr("generations[0].from_step"));
  EXPECT_THAT(code_and_text(1, 3, {{0, {0}}, {10, {0, 1}}, {9, {0}}}).message(),
              HasSubstr("generations[2].from_step: 9 is not after generations[1].from_step 10"));
  EXPECT_THAT(code_and_text(1, 3, {{0, {0}}, {0, {0, 1}}}).message(),
              HasSubstr("generations[1].from_step: 0 is not after generations[0].from_step 0"));
  EXPECT_THAT(code_and_text(2, 3, {{0, {0}}}).message(), HasSubstr("generations[0].workers: 1 workers {0}, outside"));
  EXPECT_THAT(code_and_text(1, 4, {{0, {0, 1, 2, 3}}, {9, {0, 1, 2, 3, 4}}}).message(),
              HasSubstr("generations[1].workers: 5 workers"));
  EXPECT_THAT(code_and_text(1, 3, {{0, {0, 3}}}).message(), HasSubstr("rank 3 outside [0, 3)"));
  EXPECT_THAT(code_and_text(1, 3, {{0, {1, 0}}}).message(), HasSubstr("not strictly ascending"));
  EXPECT_THAT(code_and_text(1, 3, {{0, {1, 1}}}).message(), HasSubstr("not strictly ascending"));
  EXPECT_EQ(code_and_text(1, 3, {{0, {1, 1}}}).code(), absl::StatusCode::kInvalidArgument);
}

// A joiner that died before its first step: its join (generation 1 from step 10) is
// replaced by generation 2 from the same step, and no step is merged by generation 1.
TEST(MembershipScheduleTest, AGenerationMayStartWhereTheOneBeforeItStartsWhichThenMergesNoStep) {
  absl::StatusOr<MembershipSchedule> s = MembershipSchedule::Create(1, 3, {{0, {0, 1}}, {10, {0, 1, 2}}, {10, {0, 1}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->IndexAt(9), 0);
  EXPECT_EQ(s->IndexAt(10), 2);
  EXPECT_EQ(s->IndexAt(1000), 2);
  EXPECT_TRUE(s->ZeroLength(1));
  EXPECT_FALSE(s->ZeroLength(0));
  EXPECT_FALSE(s->ZeroLength(2));
  // Two in a row: the last of those starting at a step merges it.
  ASSERT_TRUE(s->Append({10, {0, 2}}).ok());
  EXPECT_EQ(s->IndexAt(10), 3);
  EXPECT_TRUE(s->ZeroLength(2));
  EXPECT_EQ(*s->LowestFreeRank(), 1);
  // Never before the one before.
  EXPECT_THAT(s->Append({9, {0, 1}}).message(), HasSubstr("generations[4].from_step: 9 is not after"));
  EXPECT_EQ(s->generations().size(), 4u);
}

TEST(MembershipScheduleTest, AppendChecksAndChangesNothingOnError) {
  MembershipSchedule s = *MembershipSchedule::Create(1, 3, {{0, {0, 1}}});
  EXPECT_FALSE(s.Append({0, {0}}).ok());
  EXPECT_FALSE(s.Append({10, {}}).ok());
  EXPECT_EQ(s.generations().size(), 1u);
  ASSERT_TRUE(s.Append({10, {1}}).ok());
  EXPECT_EQ(s.At(10).ranks, (std::vector<int>{1}));
  EXPECT_EQ(*s.LowestFreeRank(), 0);
}

TEST(MembershipScheduleTest, ResumedAtKeepsThePastAndNumbersTheWorkersInForceFromZero) {
  const MembershipSchedule s = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {5, {0, 1, 2}}, {9, {0, 2}}, {30, {0}}});
  // {0,2} in force at step 20: the resumed job's workers 0 and 1 take their places from 20.
  const MembershipSchedule r = s.ResumedAt(20);
  ASSERT_EQ(r.generations().size(), 4u);
  EXPECT_EQ(r.generations()[2], (Generation{9, {0, 2}}));
  EXPECT_EQ(r.generations()[3], (Generation{20, {0, 1}}));
  EXPECT_EQ(r.min_workers(), 1);
  EXPECT_EQ(r.max_workers(), 4);
  // A generation that starts at the step is renumbered in place; one numbered so already
  // stays as it is; later generations are left out.
  EXPECT_EQ(s.ResumedAt(9).generations().back(), (Generation{9, {0, 1}}));
  EXPECT_EQ(s.ResumedAt(9).generations().size(), 3u);
  EXPECT_EQ(s.ResumedAt(7).generations().back(), (Generation{5, {0, 1, 2}}));
  EXPECT_EQ(s.ResumedAt(7).generations().size(), 2u);
  EXPECT_EQ(s.ResumedAt(3), *MembershipSchedule::Create(1, 4, {{0, {0, 1}}}));
}

}  // namespace
}  // namespace dtrain::elastic
