// A shard store whose steps merge the ranks a MembershipGate names for them
// (ShardStore::SetStepRanks): with ranks 0..n-1 bit for bit a plain store, and across a
// committed change each step merged from exactly its generation.
#include <cstring>
#include <random>
#include <vector>

#include "common/elastic/membership_gate.h"
#include "common/kv/rank_mean.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kKey = 3;
constexpr int64_t kNumel = 33;

kv::StoreConfig Config(int num_workers, double lr, double momentum) {
  kv::StoreConfig c;
  c.num_workers = num_workers;
  c.optimizer.learning_rate = lr;
  c.optimizer.momentum = momentum;
  c.keep_previous_version = true;
  return c;
}

kv::KeyState StateOf(const kv::ShardStore& store) {
  std::vector<kv::KeyState> snap;
  EXPECT_TRUE(store.Snapshot({kKey}, &snap).ok());
  return snap.at(0);
}

TEST(ElasticStoreTest, RanksZeroToNMergeBitForBitAsAPlainStore) {
  std::mt19937 rng(5);
  std::normal_distribution<float> value(0.0f, 10.0f);
  const std::vector<float> init(kNumel, 0.5f);
  kv::ShardStore plain;
  ASSERT_TRUE(plain.Configure(Config(3, 0.1, 0.9)).ok());
  MembershipGate gate(*MembershipSchedule::Create(2, 5, {{0, {0, 1, 2}}}));
  kv::ShardStore elastic;
  elastic.SetStepRanks(&gate);
  ASSERT_TRUE(elastic.Configure(Config(5, 0.1, 0.9)).ok());  // num_workers: the ranks' bound
  for (kv::ShardStore* s : {&plain, &elastic}) ASSERT_TRUE(s->InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  for (int64_t step = 0; step < 6; ++step) {
    std::vector<std::vector<float>> grads(3, std::vector<float>(kNumel));
    for (auto& g : grads) {
      for (float& v : g) v = value(rng);
    }
    // Arrival order changes from step to step; the sum's order must not.
    const std::vector<int> order = step % 2 == 0 ? std::vector<int>{2, 0, 1} : std::vector<int>{1, 2, 0};
    for (int w : order) {
      ASSERT_TRUE(plain.Push(w, step, kKey, grads[w].data(), kNumel).ok());
      ASSERT_TRUE(gate.AdmitPush(step, 0).ok());
      ASSERT_TRUE(elastic.Push(w, step, kKey, grads[w].data(), kNumel).ok());
    }
  }
  const kv::KeyState a = StateOf(plain), b = StateOf(elastic);
  EXPECT_EQ(a.version, 6);
  EXPECT_EQ(b.version, 6);
  EXPECT_EQ(std::memcmp(a.values.data(), b.values.data(), kNumel * sizeof(float)), 0);
  ASSERT_EQ(a.optimizer_state.size(), b.optimizer_state.size());
  EXPECT_EQ(std::memcmp(a.optimizer_state.data(), b.optimizer_state.data(), a.optimizer_state.size() * sizeof(float)),
            0);
}

TEST(ElasticStoreTest, EachStepMergesExactlyItsGenerationsPushes) {
  MembershipGate gate(*MembershipSchedule::Create(1, 4, {{0, {0, 1}}}));
  kv::ShardStore store;
  store.SetStepRanks(&gate);
  ASSERT_TRUE(store.Configure(Config(4, 1.0, 0.0)).ok());
  const std::vector<float> zero(kNumel, 0.0f);
  ASSERT_TRUE(store.InitKey(kKey, {kNumel}, zero.data(), kNumel).ok());
  std::vector<std::vector<float>> g(4, std::vector<float>(kNumel));
  for (int w = 0; w < 4; ++w) {
    for (int64_t i = 0; i < kNumel; ++i) g[w][i] = static_cast<float>((w + 1) * 1000 + i) / 7.0f;
  }
  // Step 0: workers 0 and 1; worker 3 is not in the job yet.
  const absl::Status early = store.Push(3, 0, kKey, g[3].data(), kNumel);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(early.message(), HasSubstr("is not in generation 0 from step 0, workers {0,1}"));
  for (int w : {1, 0}) {
    ASSERT_TRUE(gate.AdmitPush(0, 0).ok());
    ASSERT_TRUE(store.Push(w, 0, kKey, g[w].data(), kNumel).ok());
  }
  EXPECT_EQ(StateOf(store).version, 1);
  // Worker 3 joins from step 1.
  const auto proposal = gate.Propose(1);
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  ASSERT_TRUE(gate.Commit(1, {proposal->highest_step + 1, {0, 1, 3}}).ok());
  EXPECT_EQ(gate.AdmitPush(1, 0).code(), absl::StatusCode::kAborted);  // an old-generation push of step 1
  for (int w : {3, 0}) {
    ASSERT_TRUE(gate.AdmitPush(1, 1).ok());
    ASSERT_TRUE(store.Push(w, 1, kKey, g[w].data(), kNumel).ok());
  }
  EXPECT_EQ(StateOf(store).version, 1);  // waits for worker 1 too
  ASSERT_TRUE(store.Push(1, 1, kKey, g[1].data(), kNumel).ok());
  const kv::KeyState after = StateOf(store);
  EXPECT_EQ(after.version, 2);
  // SGD with lr 1 from zero: minus the sum of the two steps' means, each in rank order.
  std::vector<float> m0, m1;
  auto grad_of = [&](int r) { return g[r].data(); };
  const float* mean0 = kv::MeanOverRanks({0, 1}, kNumel, grad_of, &m0);
  const float* mean1 = kv::MeanOverRanks({0, 1, 3}, kNumel, grad_of, &m1);
  for (int64_t i = 0; i < kNumel; ++i) EXPECT_EQ(after.values[i], (0.0f - mean0[i]) - mean1[i]) << i;
}

TEST(ElasticStoreTest, AStalledStepNamesOnlyItsGenerationsMissingRanks) {
  const absl::Time start = absl::FromUnixSeconds(1800000000);
  absl::Time now = start;
  MembershipGate gate(*MembershipSchedule::Create(1, 4, {{0, {0, 1, 3}}}));
  kv::ShardStore store([&now] { return now; });
  store.SetStepRanks(&gate);
  ASSERT_TRUE(store.Configure(Config(4, 1.0, 0.0)).ok());
  const std::vector<float> zero(kNumel, 0.0f);
  ASSERT_TRUE(store.InitKey(kKey, {kNumel}, zero.data(), kNumel).ok());
  ASSERT_TRUE(store.Push(0, 0, kKey, zero.data(), kNumel).ok());
  absl::Status got;
  store.Pull(0, kKey, 1, start + absl::Seconds(5),
             [&got](const absl::Status& s, int64_t, const float*, int64_t) { got = s; });
  store.CheckDeadlines(start + absl::Seconds(6));
  EXPECT_EQ(got.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.message(), HasSubstr("waiting for worker 1 (never heard from), worker 3 (never heard from)"));
  EXPECT_THAT(got.message(), Not(HasSubstr("worker 2")));
}

TEST(ElasticStoreTest, OnlySyncMerges) {
  MembershipGate gate(MembershipSchedule::Fixed(2));
  kv::ShardStore store;
  store.SetStepRanks(&gate);
  kv::StoreConfig c = Config(2, 0.1, 0);
  c.mode = kv::MergeMode::kAsync;
  c.keep_previous_version = false;
  const absl::Status s = store.Configure(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sync mode only"));
}

}  // namespace
}  // namespace dtrain::elastic
