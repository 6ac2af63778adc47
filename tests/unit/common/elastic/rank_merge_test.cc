// The elastic sync merge: RankSetMergeRule's decisions and MeanOverRanks' sums, against
// the shard store's own sync merge where the ranks are {0 .. n-1}.
#include <cstring>
#include <random>
#include <vector>

#include "common/elastic/membership_gate.h"
#include "common/kv/rank_mean.h"
#include "common/kv/rank_set_merge_rule.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;

kv::KeyProgress Progress(int64_t version, int pending, bool worker_pending) {
  kv::KeyProgress p;
  p.key = 5;
  p.version = version;
  p.pending_count = pending;
  p.worker_pending = worker_pending;
  return p;
}

TEST(RankSetMergeRuleTest, OneFullGenerationDecidesAsSyncMergeRule) {
  for (int n = 1; n <= 4; ++n) {
    const MembershipGate gate(MembershipSchedule::Fixed(n));
    const kv::RankSetMergeRule rule(&gate);
    const kv::SyncMergeRule sync(n);
    for (int64_t version = 0; version < 3; ++version) {
      for (int64_t step = 0; step < 4; ++step) {
        for (int pending = 0; pending < n; ++pending) {
          for (bool mine : {false, true}) {
            const kv::KeyProgress p = Progress(version, pending, mine);
            const auto a = rule.OnPush(p, n - 1, step);
            const auto b = sync.OnPush(p, n - 1, step);
            ASSERT_EQ(a.ok(), b.ok());
            if (a.ok()) {
              EXPECT_EQ(*a, *b);
            } else {
              EXPECT_EQ(a.status(), b.status());
            }
          }
        }
      }
    }
  }
}

TEST(RankSetMergeRuleTest, EachStepWaitsForItsGenerationsRanksOnly) {
  auto schedule = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {10, {0, 1, 3}}});
  const MembershipGate gate(schedule);
  const kv::RankSetMergeRule rule(&gate);
  EXPECT_EQ(*rule.OnPush(Progress(9, 1, false), 1, 9), kv::PushAction::kMergeStep);  // 2 ranks
  EXPECT_EQ(*rule.OnPush(Progress(10, 1, false), 1, 10), kv::PushAction::kStorePending);
  EXPECT_EQ(*rule.OnPush(Progress(10, 2, false), 3, 10), kv::PushAction::kMergeStep);  // 3 ranks
  const auto refused = rule.OnPush(Progress(9, 0, false), 3, 9);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("worker 3 pushed key 5 for step 9 but is not in generation 0 from step 0, workers {0,1}"));
  EXPECT_FALSE(rule.OnPush(Progress(10, 0, false), 2, 10).ok());
}

// A store's merged weights after one sync step of `grads` (SGD, lr 1, from zero: the
// weights are minus the mean, exactly).
std::vector<float> StoreMean(const std::vector<std::vector<float>>& grads) {
  kv::ShardStore store;
  kv::StoreConfig c;
  c.num_workers = static_cast<int>(grads.size());
  c.optimizer.learning_rate = 1.0;
  EXPECT_TRUE(store.Configure(c).ok());
  const int64_t n = static_cast<int64_t>(grads[0].size());
  const std::vector<float> zero(n, 0.0f);
  EXPECT_TRUE(store.InitKey(1, {n}, zero.data(), n).ok());
  for (int w = static_cast<int>(grads.size()) - 1; w >= 0; --w) {
    EXPECT_TRUE(store.Push(w, 0, 1, grads[w].data(), n).ok());
  }
  std::vector<kv::KeyState> snap;
  EXPECT_TRUE(store.Snapshot({1}, &snap).ok());
  std::vector<float> mean = snap[0].values;
  for (float& v : mean) v = -v;
  return mean;
}

TEST(MeanOverRanksTest, RanksZeroToNMergeBitForBitAsTheShardStore) {
  std::mt19937 rng(11);
  std::normal_distribution<float> value(0.0f, 1e3f);
  for (int n = 1; n <= 5; ++n) {
    std::vector<std::vector<float>> grads(n, std::vector<float>(37));
    for (auto& g : grads) {
      for (float& v : g) v = value(rng);
    }
    std::vector<int> ranks(n);
    for (int r = 0; r < n; ++r) ranks[r] = r;
    std::vector<float> merged;
    const float* mean = kv::MeanOverRanks(
        ranks, 37, [&](int r) { return grads[r].data(); }, &merged);
    const std::vector<float> expected = StoreMean(grads);
    EXPECT_EQ(std::memcmp(mean, expected.data(), 37 * sizeof(float)), 0) << n << " workers";
  }
}

TEST(MeanOverRanksTest, SumsAGapsRanksInAscendingOrder) {
  // In float, (1 + 1e8) - 1e8 == 0 but (-1e8 + 1e8) + 1 == 1: the order shows.
  std::vector<std::vector<float>> grads(4);
  grads[0] = {1};
  grads[2] = {1e8f};
  grads[3] = {-1e8f};
  std::vector<float> merged;
  const float* mean = kv::MeanOverRanks(
      {0, 2, 3}, 1, [&](int r) { return grads[r].data(); }, &merged);
  EXPECT_EQ(mean[0], 0.0f);
  // One rank: its push is the mean, not copied.
  EXPECT_EQ(kv::MeanOverRanks(
                {2}, 1, [&](int r) { return grads[r].data(); }, &merged),
            grads[2].data());
}

}  // namespace
}  // namespace dtrain::elastic
