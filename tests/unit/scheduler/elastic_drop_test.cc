#include "services/scheduler/elastic_drop.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::scheduler {
namespace {

using ::testing::HasSubstr;

TEST(ElasticDropTest, NothingOfTheStepMergedStartsThereAfterDroppingItsPendingPushes) {
  auto plan = PlanDrop(2, {{812, 812}, {812, 812}}, std::nullopt);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kind, DropPlan::Kind::kDropPending);
  EXPECT_EQ(plan->step, 812);
}

TEST(ElasticDropTest, AStepMergedOnSomeKeysRollsBackToTheCommonSnapshot) {
  auto plan = PlanDrop(2, {{812, 813}, {812, 812}}, 800);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kind, DropPlan::Kind::kRollBack);
  EXPECT_EQ(plan->step, 800);
  // Servers apart by a step (one merged all its keys, the other none) is mixed too.
  EXPECT_EQ(PlanDrop(2, {{813, 813}, {812, 812}}, 810)->kind, DropPlan::Kind::kRollBack);
}

TEST(ElasticDropTest, WithoutAUsableSnapshotTheJobFailsNamingTheWorker) {
  const auto none = PlanDrop(2, {{812, 813}}, std::nullopt);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(),
              HasSubstr("worker 2 died in step 812 after some keys merged it (versions 812..813)"));
  EXPECT_THAT(PlanDrop(2, {{812, 813}}, 813).status().message(), HasSubstr("of a step before it"));
  EXPECT_EQ(PlanDrop(2, {}, 5).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dtrain::scheduler
