// Replication's two promises below the wire: every node computes the same chains, and
// replicas fed the same pushes in any arrival order hold bit-identical state (what
// lets a worker take its weights from whichever replica is alive).
#include "common/kv/replica_chain.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ReplicaChainTest, ChainStartsAtHomeAndWraps) {
  EXPECT_THAT(ReplicaChain(0, 2, 3), ElementsAre(0, 1));
  EXPECT_THAT(ReplicaChain(2, 2, 3), ElementsAre(2, 0));
  EXPECT_THAT(ReplicaChain(1, 3, 3), ElementsAre(1, 2, 0));
  EXPECT_THAT(ReplicaChain(1, 1, 3), ElementsAre(1));
}

TEST(ReplicaChainTest, CheckRefusesMoreReplicasThanServers) {
  EXPECT_TRUE(CheckReplication(1, 1).ok());
  EXPECT_TRUE(CheckReplication(3, 3).ok());
  EXPECT_TRUE(CheckReplication(1, 0).ok());  // local kv-store: no servers
  const absl::Status more = CheckReplication(3, 2);
  EXPECT_EQ(more.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(more.message()), HasSubstr("--replication 3"));
  EXPECT_THAT(std::string(more.message()), HasSubstr("has 2"));
  EXPECT_EQ(CheckReplication(0, 3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReplicaChainTest, FirstAliveSkipsDeadMembers) {
  const std::vector<int> chain = {2, 0};
  EXPECT_EQ(FirstAlive(chain, [](int) { return true; }), 2);
  EXPECT_EQ(FirstAlive(chain, [](int r) { return r != 2; }), 0);
  EXPECT_EQ(FirstAlive(chain, [](int) { return false; }), -1);
}

constexpr int kWorkers = 3;
constexpr int64_t kNumel = 7;
constexpr uint64_t kKey = 5;

std::vector<float> Grad(int worker, int64_t step) {
  std::vector<float> g(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) {
    g[i] = 0.1f * static_cast<float>(worker + 1) + 0.0137f * static_cast<float>(step * 7 + i) / 3.0f;
  }
  return g;
}

std::unique_ptr<ShardStore> NewReplica() {
  auto store = std::make_unique<ShardStore>();
  StoreConfig c;
  c.mode = MergeMode::kSync;
  c.num_workers = kWorkers;
  c.optimizer.learning_rate = 0.1;
  c.optimizer.momentum = 0.9;
  c.keep_previous_version = true;
  EXPECT_TRUE(store->Configure(c).ok());
  std::vector<float> init(kNumel, 0.25f);
  EXPECT_TRUE(store->InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  return store;
}

// Two replicas get each step's pushes in different orders (as the workers' streams to
// two servers deliver them), one of them with a resent duplicate: weights and
// momentum end bit-identical.
TEST(ReplicatedApplyTest, ReplicasEndBitIdenticalWhateverTheArrivalOrder) {
  auto a = NewReplica();
  auto b = NewReplica();
  constexpr int64_t kSteps = 20;
  for (int64_t step = 0; step < kSteps; ++step) {
    std::vector<int> order = {0, 1, 2};
    std::vector<int> other = order;
    std::rotate(other.begin(), other.begin() + (step % kWorkers), other.end());
    std::reverse(other.begin(), other.end());
    for (int w : order) {
      const auto g = Grad(w, step);
      ASSERT_TRUE(a->Push(w, step, kKey, g.data(), kNumel).ok());
    }
    for (int w : other) {
      const auto g = Grad(w, step);
      ASSERT_TRUE(b->Push(w, step, kKey, g.data(), kNumel).ok());
      // A worker that failed over resends what was unacknowledged: counted once.
      ASSERT_TRUE(b->Push(w, step, kKey, g.data(), kNumel).ok());
    }
  }
  std::vector<KeyState> sa, sb;
  ASSERT_TRUE(a->Snapshot({kKey}, &sa).ok());
  ASSERT_TRUE(b->Snapshot({kKey}, &sb).ok());
  ASSERT_EQ(sa.size(), 1u);
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_EQ(sa[0].version, kSteps);
  EXPECT_EQ(sb[0].version, kSteps);
  ASSERT_EQ(sa[0].values.size(), sb[0].values.size());
  ASSERT_EQ(sa[0].optimizer_state.size(), sb[0].optimizer_state.size());
  EXPECT_EQ(std::memcmp(sa[0].values.data(), sb[0].values.data(), sa[0].values.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(sa[0].optimizer_state.data(), sb[0].optimizer_state.data(),
                        sa[0].optimizer_state.size() * sizeof(float)),
            0);
}

}  // namespace
}  // namespace dtrain::kv
