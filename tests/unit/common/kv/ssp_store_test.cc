// Bounded staleness (dist_ssp): the SSP merge rule's decisions, and a shard store that
// holds pushes up to `staleness` steps ahead, merges each step exactly as sync does,
// and is sync bit for bit at staleness 0.
#include <memory>
#include <optional>
#include <vector>

#include "common/kv/merge_rule.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kKey = 7;

KeyProgress At(int64_t version, int pending_count = 0, bool worker_pending = false, bool worker_ahead = false) {
  KeyProgress p;
  p.key = kKey;
  p.version = version;
  p.pending_count = pending_count;
  p.worker_pending = worker_pending;
  p.worker_ahead = worker_ahead;
  return p;
}

TEST(SspMergeRuleTest, HoldsPushesUpToTheStalenessAheadAndRefusesFurther) {
  SspMergeRule rule(2, /*staleness=*/2);
  EXPECT_EQ(*rule.OnPush(At(5), 0, 5), PushAction::kStorePending) << "the current step, as in sync";
  EXPECT_EQ(*rule.OnPush(At(5, 1), 1, 5), PushAction::kMergeStep);
  EXPECT_EQ(*rule.OnPush(At(5), 0, 6), PushAction::kStoreAhead);
  EXPECT_EQ(*rule.OnPush(At(5), 0, 7), PushAction::kStoreAhead);
  EXPECT_EQ(*rule.OnPush(At(5, 0, false, /*worker_ahead=*/true), 0, 7), PushAction::kIgnore) << "a retry";
  EXPECT_EQ(*rule.OnPush(At(5), 0, 4), PushAction::kIgnore) << "a merged step";
  absl::StatusOr<PushAction> far = rule.OnPush(At(5), 0, 8);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(far.status().message(), HasSubstr("more than --staleness 2 steps ahead"));
  EXPECT_TRUE(rule.CanAnswerPull(At(5), 5));
  EXPECT_FALSE(rule.CanAnswerPull(At(5), 6));
}

TEST(SspMergeRuleTest, IsCreatedForSspConfigs) {
  StoreConfig c;
  c.mode = MergeMode::kSsp;
  c.num_workers = 2;
  c.staleness = 3;
  EXPECT_NE(dynamic_cast<SspMergeRule*>(CreateMergeRule(c).get()), nullptr);
}

class SspStoreTest : public ::testing::Test {
 protected:
  static std::unique_ptr<ShardStore> Store(MergeMode mode, int staleness, int workers = 2) {
    auto store = std::make_unique<ShardStore>();
    StoreConfig c;
    c.mode = mode;
    c.num_workers = workers;
    c.staleness = staleness;
    c.optimizer.learning_rate = 0.5;
    c.optimizer.momentum = 0.9;
    EXPECT_TRUE(store->Configure(c).ok());
    const std::vector<float> init = {1, 2, 3, 4};
    EXPECT_TRUE(store->InitKey(kKey, {4}, init.data(), 4).ok());
    return store;
  }
  static absl::Status Push(ShardStore& s, int worker, int64_t step, float g) {
    const std::vector<float> grad = {g, -g, 2 * g, 0.25f * g};
    return s.Push(worker, step, kKey, grad.data(), 4);
  }
  // The weights and version a pull of `min_version` gets now; nullopt if it would wait.
  static std::optional<std::pair<int64_t, std::vector<float>>> PullNow(ShardStore& s, int worker, int64_t min_version) {
    std::optional<std::pair<int64_t, std::vector<float>>> got;
    s.Pull(
        worker, kKey, min_version, absl::Now() + absl::Seconds(30),
        [&got](const absl::Status& st, int64_t v, const float* d, int64_t n) {
          if (st.ok()) got.emplace(v, std::vector<float>(d, d + n));
        },
        /*owner=*/99);
    if (!got) s.DropPulls(99);
    return got;
  }
};

TEST_F(SspStoreTest, AFastWorkerRunsAheadByTheStalenessAndStepsMergeInOrderAsInSync) {
  auto ssp = Store(MergeMode::kSsp, 2);
  // Worker 0 pushes steps 0, 1, 2 while worker 1 has pushed nothing: all held.
  for (int64_t t = 0; t <= 2; ++t) {
    ASSERT_TRUE(Push(*ssp, 0, t, 1.0f + t).ok()) << t;
    EXPECT_EQ(ssp->PullVersionAfterPush(t), std::max<int64_t>(0, t - 1));
  }
  EXPECT_EQ(ssp->Step(), 0);
  absl::Status too_far = Push(*ssp, 0, 3, 9);
  EXPECT_EQ(too_far.code(), absl::StatusCode::kFailedPrecondition) << too_far;
  EXPECT_FALSE(PullNow(*ssp, 0, 1)) << "step 0 has not merged";
  // Worker 1 catches up one step at a time; each of its pushes merges a step.
  for (int64_t t = 0; t <= 2; ++t) {
    ASSERT_TRUE(Push(*ssp, 1, t, -0.5f * t).ok()) << t;
    EXPECT_EQ(ssp->Step(), t + 1);
  }
  // The same pushes, step by step, into a sync store: the same weights, bit for bit.
  auto sync = Store(MergeMode::kSync, 0);
  for (int64_t t = 0; t <= 2; ++t) {
    ASSERT_TRUE(Push(*sync, 1, t, -0.5f * t).ok());
    ASSERT_TRUE(Push(*sync, 0, t, 1.0f + t).ok());
  }
  auto a = PullNow(*ssp, 0, 3);
  auto b = PullNow(*sync, 0, 3);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->first, 3);
  EXPECT_EQ(a->second, b->second);
}

TEST_F(SspStoreTest, HeldStepsMergeAtOnceWhenTheSlowWorkersPushesArrive) {
  auto ssp = Store(MergeMode::kSsp, 3);
  ASSERT_TRUE(Push(*ssp, 0, 0, 1).ok());
  ASSERT_TRUE(Push(*ssp, 0, 1, 2).ok());
  ASSERT_TRUE(Push(*ssp, 1, 1, 3).ok()) << "worker 1 too may push ahead of the version";
  ASSERT_TRUE(Push(*ssp, 1, 1, 3).ok()) << "a retry is ignored";
  EXPECT_EQ(ssp->Step(), 0);
  ASSERT_TRUE(Push(*ssp, 1, 0, 4).ok());
  EXPECT_EQ(ssp->Step(), 2) << "step 1 was complete: it merged right after step 0";
  auto sync = Store(MergeMode::kSync, 0);
  for (auto [w, t, g] : std::vector<std::tuple<int, int64_t, float>>{{0, 0, 1}, {1, 0, 4}, {0, 1, 2}, {1, 1, 3}}) {
    ASSERT_TRUE(Push(*sync, w, t, g).ok());
  }
  EXPECT_EQ(PullNow(*ssp, 1, 2)->second, PullNow(*sync, 1, 2)->second);
}

TEST_F(SspStoreTest, StalenessZeroIsSync) {
  auto ssp = Store(MergeMode::kSsp, 0);
  EXPECT_EQ(ssp->PullVersionAfterPush(4), 5);
  EXPECT_EQ(Push(*ssp, 0, 1, 1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Push(*ssp, 0, 0, 1).ok());
  ASSERT_TRUE(Push(*ssp, 1, 0, 2).ok());
  auto sync = Store(MergeMode::kSync, 0);
  ASSERT_TRUE(Push(*sync, 0, 0, 1).ok());
  ASSERT_TRUE(Push(*sync, 1, 0, 2).ok());
  EXPECT_EQ(PullNow(*ssp, 0, 1)->second, PullNow(*sync, 0, 1)->second);
}

TEST_F(SspStoreTest, StalenessIsOnlyForSspAndCapped) {
  for (auto [mode, staleness] : std::vector<std::pair<MergeMode, int>>{{MergeMode::kSync, 1},
                                                                       {MergeMode::kAsync, 2},
                                                                       {MergeMode::kSsp, -1},
                                                                       {MergeMode::kSsp, kMaxStaleness + 1}}) {
    ShardStore store;
    StoreConfig c;
    c.mode = mode;
    c.num_workers = 2;
    c.staleness = staleness;
    absl::Status s = store.Configure(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << staleness;
    EXPECT_THAT(s.message(), HasSubstr("dist_ssp"));
  }
}

// A push computed on weights `lag` versions old is scaled by 1/(1 + lag) before it joins
// its step's mean, whether it arrived in its step's turn or was held ahead. The
// reference: a sync store given those scaled pushes.
TEST_F(SspStoreTest, AStalePushCountsLessInItsStepsMean) {
  auto ssp = Store(MergeMode::kSsp, 2);
  ASSERT_TRUE(Push(*ssp, 1, 0, -1).ok());
  const std::vector<float> g1 = {4, -4, 8, 1};
  ASSERT_TRUE(ssp->Push(1, 1, kKey, g1.data(), 4, /*lag=*/1).ok()) << "held ahead, with its weight";
  ASSERT_TRUE(Push(*ssp, 0, 0, 1).ok());
  ASSERT_TRUE(Push(*ssp, 0, 1, 2).ok());
  EXPECT_EQ(ssp->Step(), 2);
  const std::vector<float> g2 = {5, -5, 10, 1.25f};
  const std::vector<float> g3 = {2, 2, 2, 2};
  ASSERT_TRUE(ssp->Push(0, 2, kKey, g2.data(), 4, /*lag=*/2).ok());
  ASSERT_TRUE(ssp->Push(1, 2, kKey, g3.data(), 4).ok()) << "merged in its turn, with the held one's weight";
  auto sync = Store(MergeMode::kSync, 0);
  ASSERT_TRUE(Push(*sync, 0, 0, 1).ok());
  ASSERT_TRUE(Push(*sync, 1, 0, -1).ok());
  // Step 1: worker 1's push (4 times {1, -1, 2, 0.25}) counts half.
  ASSERT_TRUE(Push(*sync, 0, 1, 2).ok());
  ASSERT_TRUE(Push(*sync, 1, 1, 2).ok());
  // Step 2: worker 0's counts a third.
  std::vector<float> third(4);
  for (size_t i = 0; i < 4; ++i) third[i] = g2[i] / 3;
  ASSERT_TRUE(sync->Push(0, 2, kKey, third.data(), 4).ok());
  ASSERT_TRUE(sync->Push(1, 2, kKey, g3.data(), 4).ok());
  const std::vector<float> got = PullNow(*ssp, 0, 3)->second;
  const std::vector<float> want = PullNow(*sync, 0, 3)->second;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  // Step 3: the stale push is the step's last, merged as it arrives; it counts half.
  ASSERT_TRUE(Push(*ssp, 1, 3, 1).ok());
  ASSERT_TRUE(ssp->Push(0, 3, kKey, g2.data(), 4, /*lag=*/1).ok());
  ASSERT_TRUE(Push(*sync, 1, 3, 1).ok());
  ASSERT_TRUE(Push(*sync, 0, 3, 2.5f).ok());  // g2 / 2
  const std::vector<float> got4 = PullNow(*ssp, 0, 4)->second;
  const std::vector<float> want4 = PullNow(*sync, 0, 4)->second;
  ASSERT_EQ(got4.size(), want4.size());
  for (size_t i = 0; i < got4.size(); ++i) EXPECT_NEAR(got4[i], want4[i], 1e-5) << i;
}

TEST_F(SspStoreTest, ALagBeyondTheStalenessOrOutsideSspIsRefused) {
  auto ssp = Store(MergeMode::kSsp, 2);
  const std::vector<float> g = {1, 1, 1, 1};
  for (int64_t lag : {int64_t{3}, int64_t{-1}}) {
    absl::Status s = ssp->Push(0, 2, kKey, g.data(), 4, lag);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << lag;
    EXPECT_THAT(s.message(), HasSubstr("--staleness 2 allows 0 to 2")) << lag;
  }
  absl::Status beyond = ssp->Push(0, 1, kKey, g.data(), 4, 2);
  EXPECT_EQ(beyond.code(), absl::StatusCode::kInvalidArgument) << "weights of version -1 do not exist";
  EXPECT_THAT(beyond.message(), HasSubstr("allows 0 to 1"));
  auto sync = Store(MergeMode::kSync, 0);
  absl::Status s = sync->Push(0, 3, kKey, g.data(), 4, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("only dist_ssp pushes may be stale"));
  EXPECT_EQ(ssp->Step(), 0) << "nothing refused was held";
}

TEST_F(SspStoreTest, OneWorkerMergesItsHeldStepsAlone) {
  auto ssp = Store(MergeMode::kSsp, 2, /*workers=*/1);
  ASSERT_TRUE(Push(*ssp, 0, 0, 1).ok());
  ASSERT_TRUE(Push(*ssp, 0, 1, 2).ok());
  EXPECT_EQ(ssp->Step(), 2);
  EXPECT_THAT(PullNow(*ssp, 0, 2)->second, ::testing::SizeIs(4));
}

}  // namespace
}  // namespace dtrain::kv
