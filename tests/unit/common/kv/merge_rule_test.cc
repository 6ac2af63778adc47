// The sync and async merge rules' decisions, without a store around them.
#include "common/kv/merge_rule.h"

#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

KeyProgress At(int64_t version, int pending_count = 0, bool worker_pending = false, int64_t worker_last_push = -1) {
  KeyProgress p;
  p.key = 7;
  p.version = version;
  p.pending_count = pending_count;
  p.worker_pending = worker_pending;
  p.worker_last_push = worker_last_push;
  return p;
}

TEST(MergeRuleTest, CreatedFromTheConfigsMode) {
  StoreConfig c;
  c.num_workers = 2;
  c.mode = MergeMode::kSync;
  EXPECT_NE(dynamic_cast<SyncMergeRule*>(CreateMergeRule(c).get()), nullptr);
  c.mode = MergeMode::kAsync;
  EXPECT_NE(dynamic_cast<AsyncMergeRule*>(CreateMergeRule(c).get()), nullptr);
}

TEST(MergeRuleTest, SyncHoldsPushesUntilTheLastThenMerges) {
  SyncMergeRule rule(3);
  EXPECT_EQ(*rule.OnPush(At(5, 0), 0, 5), PushAction::kStorePending);
  EXPECT_EQ(*rule.OnPush(At(5, 1), 1, 5), PushAction::kStorePending);
  EXPECT_EQ(*rule.OnPush(At(5, 2), 2, 5), PushAction::kMergeStep);
  EXPECT_EQ(*SyncMergeRule(1).OnPush(At(0), 0, 0), PushAction::kMergeStep);
}

TEST(MergeRuleTest, SyncIgnoresRetriesAndRefusesPushesAhead) {
  SyncMergeRule rule(2);
  EXPECT_EQ(*rule.OnPush(At(5), 1, 4), PushAction::kIgnore) << "a step already merged";
  EXPECT_EQ(*rule.OnPush(At(5, 1, /*worker_pending=*/true), 1, 5), PushAction::kIgnore) << "a second push";
  absl::StatusOr<PushAction> ahead = rule.OnPush(At(5), 1, 6);
  ASSERT_FALSE(ahead.ok());
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ahead.status().message(),
            "worker 1 pushed key 7 for step 6 but the key is at version 5 (pull before pushing the next step)");
}

TEST(MergeRuleTest, SyncPullWaitsForItsVersion) {
  SyncMergeRule rule(2);
  EXPECT_TRUE(rule.CanAnswerPull(At(5), 5));
  EXPECT_TRUE(rule.CanAnswerPull(At(5), 3));
  EXPECT_FALSE(rule.CanAnswerPull(At(5), 6));
}

TEST(MergeRuleTest, AsyncAppliesNewStepsIgnoresOldOnesAndNeverWaits) {
  AsyncMergeRule rule;
  EXPECT_EQ(*rule.OnPush(At(0), 0, 0), PushAction::kApplyNow) << "first push";
  EXPECT_EQ(*rule.OnPush(At(9, 0, false, /*worker_last_push=*/3), 0, 4), PushAction::kApplyNow)
      << "any version: async does not compare with it";
  EXPECT_EQ(*rule.OnPush(At(9, 0, false, 3), 0, 3), PushAction::kIgnore);
  EXPECT_EQ(*rule.OnPush(At(9, 0, false, 3), 0, 2), PushAction::kIgnore);
  EXPECT_TRUE(rule.CanAnswerPull(At(0), 100));
}

}  // namespace
}  // namespace dtrain::kv
