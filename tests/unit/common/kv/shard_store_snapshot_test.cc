// The shard store's side of server snapshots and rollback: every key hands
// out its state at each multiple of the interval, and Restore to such a state makes
// the steps after it come out bit-identical to the run that never rolled back.
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::HasSubstr;

constexpr int kWorkers = 2;
constexpr int64_t kNumel = 4;
const std::vector<uint64_t> kKeys = {1, 2};

std::vector<float> Grad(int worker, int64_t step, uint64_t key) {
  std::vector<float> g(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) {
    g[i] = 0.1f * static_cast<float>(worker + 1) + 0.0137f * static_cast<float>(step * 7 + key * 3 + i) / 3.0f;
  }
  return g;
}

// Collects what the hook hands out, per step.
struct Collected {
  absl::Mutex mu;
  std::map<int64_t, std::vector<KeyState>> by_step;
};

std::unique_ptr<ShardStore> NewStore(Collected* sink, int64_t every) {
  auto store = std::make_unique<ShardStore>();
  if (sink != nullptr) {
    store->SetSnapshotHook(every, [sink](KeyState k) {
      absl::MutexLock lock(&sink->mu);
      sink->by_step[k.version].push_back(std::move(k));
    });
  }
  StoreConfig c;
  c.mode = MergeMode::kSync;
  c.num_workers = kWorkers;
  c.optimizer.learning_rate = 0.1;
  c.optimizer.momentum = 0.9;
  c.keep_previous_version = true;
  EXPECT_TRUE(store->Configure(c).ok());
  for (uint64_t key : kKeys) {
    std::vector<float> init(kNumel, 0.5f * static_cast<float>(key));
    EXPECT_TRUE(store->InitKey(key, {kNumel}, init.data(), kNumel).ok());
  }
  return store;
}

void RunSteps(ShardStore& s, int64_t from, int64_t to) {
  for (int64_t t = from; t < to; ++t) {
    for (int w = 0; w < kWorkers; ++w) {
      for (uint64_t key : kKeys) {
        const std::vector<float> g = Grad(w, t, key);
        ASSERT_TRUE(s.Push(w, t, key, g.data(), kNumel).ok()) << "step " << t;
      }
    }
  }
}

void ExpectBitIdentical(const ShardStore& got, const ShardStore& want) {
  std::vector<KeyState> a, b;
  ASSERT_TRUE(got.Snapshot({}, &a).ok());
  ASSERT_TRUE(want.Snapshot({}, &b).ok());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].version, b[i].version);
    EXPECT_EQ(0, std::memcmp(a[i].values.data(), b[i].values.data(), kNumel * sizeof(float))) << "key " << a[i].key;
    EXPECT_EQ(0, std::memcmp(a[i].optimizer_state.data(), b[i].optimizer_state.data(), kNumel * sizeof(float)))
        << "key " << a[i].key;
  }
}

TEST(ShardStoreSnapshotTest, EveryKeyIsHandedOutAtEachMultipleOfTheInterval) {
  Collected got;
  auto store = NewStore(&got, 5);
  RunSteps(*store, 0, 12);
  absl::MutexLock lock(&got.mu);
  ASSERT_EQ(got.by_step.size(), 2u);
  for (int64_t step : {5, 10}) {
    ASSERT_EQ(got.by_step[step].size(), kKeys.size()) << "step " << step;
    for (const KeyState& k : got.by_step[step]) {
      EXPECT_EQ(k.version, step);
      EXPECT_EQ(k.values.size(), static_cast<size_t>(kNumel));
      EXPECT_EQ(k.optimizer_state.size(), static_cast<size_t>(kNumel)) << "momentum travels with the weights";
    }
  }
  // The copy is of that step, not a view of later ones.
  auto replay = NewStore(nullptr, 0);
  RunSteps(*replay, 0, 10);
  std::vector<KeyState> at10;
  ASSERT_TRUE(replay->Snapshot({}, &at10).ok());
  for (size_t i = 0; i < at10.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(got.by_step[10][i].values.data(), at10[i].values.data(), kNumel * sizeof(float)));
  }
}

TEST(ShardStoreSnapshotTest, RollbackThenRedoingTheStepsIsBitIdentical) {
  Collected got;
  auto store = NewStore(&got, 5);
  RunSteps(*store, 0, 8);
  // A parked pull of the abandoned timeline, and a pending push of step 8.
  std::optional<absl::Status> pulled;
  store->Pull(0, 1, 9, absl::InfiniteFuture(),
              [&pulled](const absl::Status& s, int64_t, const float*, int64_t) { pulled = s; });
  const std::vector<float> g = Grad(1, 8, 2);
  ASSERT_TRUE(store->Push(1, 8, 2, g.data(), kNumel).ok());

  std::vector<KeyState> at5;
  {
    absl::MutexLock lock(&got.mu);
    at5 = got.by_step[5];
  }
  ASSERT_TRUE(store->Restore(at5, 5).ok());
  ASSERT_TRUE(pulled.has_value());
  EXPECT_EQ(pulled->code(), absl::StatusCode::kAborted);
  EXPECT_THAT(pulled->message(), HasSubstr("rolled back to step 5"));
  EXPECT_EQ(store->parked_pulls(), 0);
  std::vector<KeyVersion> versions;
  ASSERT_TRUE(store->Versions({}, 0, &versions).ok());
  for (const KeyVersion& v : versions) EXPECT_EQ(v.version, 5);

  RunSteps(*store, 5, 12);
  auto uninterrupted = NewStore(nullptr, 0);
  RunSteps(*uninterrupted, 0, 12);
  ExpectBitIdentical(*store, *uninterrupted);
}

TEST(ShardStoreSnapshotTest, AMismatchedSnapshotChangesNothing) {
  auto store = NewStore(nullptr, 0);
  RunSteps(*store, 0, 3);
  std::vector<KeyState> now;
  ASSERT_TRUE(store->Snapshot({}, &now).ok());
  std::vector<KeyState> bad = now;
  bad[1].values.pop_back();
  EXPECT_EQ(store->Restore(bad, 3).code(), absl::StatusCode::kInvalidArgument);
  bad = now;
  bad[0].key = 99;
  EXPECT_EQ(store->Restore(bad, 3).code(), absl::StatusCode::kNotFound);
  bad = {now[0]};
  EXPECT_EQ(store->Restore(bad, 3).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->Restore(now, 2).code(), absl::StatusCode::kInvalidArgument) << "versions must be the step";
  auto same = NewStore(nullptr, 0);
  RunSteps(*same, 0, 3);
  ExpectBitIdentical(*store, *same);
}

}  // namespace
}  // namespace dtrain::kv
