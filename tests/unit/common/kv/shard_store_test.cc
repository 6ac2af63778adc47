#include "common/kv/shard_store.h"

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kKey = 7;
const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// What a PullCallback delivered.
struct PullResult {
  absl::Status status;
  int64_t version = -1;
  std::vector<float> data;
};

OptimizerOptions Sgd(double lr, double momentum = 0) {
  OptimizerOptions o;
  o.learning_rate = lr;
  o.momentum = momentum;
  return o;
}

class ShardStoreTest : public ::testing::Test {
 protected:
  ShardStoreTest() : store_([this] { return now_; }) {}

  void Setup(MergeMode mode, int num_workers, OptimizerOptions opt = Sgd(1.0), std::vector<float> init = {1, 2, 3, 4}) {
    StoreConfig c;
    c.mode = mode;
    c.num_workers = num_workers;
    c.optimizer = opt;
    ASSERT_TRUE(store_.Configure(c).ok());
    ASSERT_TRUE(store_.InitKey(kKey, {2, 2}, init.data(), 4).ok());
  }

  absl::Status Push(int worker, int64_t step, std::vector<float> g, uint64_t key = kKey) {
    return store_.Push(worker, step, key, g.data(), static_cast<int64_t>(g.size()));
  }

  // Starts a pull; the result lands in the returned slot when the store answers.
  std::shared_ptr<std::optional<PullResult>> Pull(int worker, int64_t min_version,
                                                  absl::Duration timeout = absl::Seconds(30), uint64_t key = kKey) {
    auto slot = std::make_shared<std::optional<PullResult>>();
    store_.Pull(worker, key, min_version, now_ + timeout,
                [slot](const absl::Status& s, int64_t version, const float* data, int64_t numel) {
                  PullResult r{s, version, {}};
                  if (data != nullptr) r.data.assign(data, data + numel);
                  *slot = std::move(r);
                });
    return slot;
  }

  absl::Time now_ = kStart;
  ShardStore store_;
};

TEST_F(ShardStoreTest, SyncPullWaitsForEveryWorkerThenSeesTheAverage) {
  Setup(MergeMode::kSync, 2);
  auto pull = Pull(0, 1);
  ASSERT_TRUE(Push(0, 0, {1, 1, 1, 1}).ok());
  EXPECT_FALSE(pull->has_value()) << "answered before worker 1 pushed";
  ASSERT_TRUE(Push(1, 0, {3, 5, -1, 0}).ok());
  ASSERT_TRUE(pull->has_value());
  ASSERT_TRUE((*pull)->status.ok()) << (*pull)->status;
  EXPECT_EQ((*pull)->version, 1);
  // lr 1: w - (g0 + g1) / 2, exact in float.
  EXPECT_THAT((*pull)->data, ElementsAre(-1, -1, 3, 3.5));
  EXPECT_EQ(store_.updates_applied(), 1);
  // A pull for a version already reached answers at once.
  auto again = Pull(1, 1);
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ((*again)->version, 1);
}

TEST_F(ShardStoreTest, SyncSumIsInRankOrderWhateverTheArrivalOrder) {
  // In float, (1 + 1e8) - 1e8 == 0 but (-1e8 + 1e8) + 1 == 1: the order shows.
  const std::vector<std::vector<float>> g = {{1, 0, 0, 0}, {1e8f, 0, 0, 0}, {-1e8f, 0, 0, 0}};
  std::vector<float> got[2];
  const int orders[2][3] = {{0, 1, 2}, {2, 1, 0}};
  for (int o = 0; o < 2; ++o) {
    ShardStore store([this] { return now_; });
    StoreConfig c;
    c.num_workers = 3;
    c.optimizer = Sgd(1.0);
    ASSERT_TRUE(store.Configure(c).ok());
    const float init[4] = {0, 0, 0, 0};
    ASSERT_TRUE(store.InitKey(kKey, {4}, init, 4).ok());
    for (int w : orders[o]) ASSERT_TRUE(store.Push(w, 0, kKey, g[w].data(), 4).ok());
    std::vector<KeyState> snap;
    ASSERT_TRUE(store.Snapshot({kKey}, &snap).ok());
    got[o] = snap[0].values;
  }
  EXPECT_EQ(got[0][0], 0.0f);  // -((1 + 1e8) - 1e8) / 3, rounded as rank order rounds
  EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), 4 * sizeof(float)), 0);
}

TEST_F(ShardStoreTest, DuplicatePushCountsOnce) {
  Setup(MergeMode::kSync, 2);
  auto pull = Pull(0, 1);
  ASSERT_TRUE(Push(0, 0, {2, 2, 2, 2}).ok());
  ASSERT_TRUE(Push(0, 0, {100, 100, 100, 100}).ok());  // a retry: ignored
  EXPECT_FALSE(pull->has_value()) << "a second push by worker 0 completed the step";
  ASSERT_TRUE(Push(1, 0, {0, 0, 0, 0}).ok());
  ASSERT_TRUE(pull->has_value());
  EXPECT_THAT((*pull)->data, ElementsAre(0, 1, 2, 3));
  // A late retry of the merged step changes nothing.
  ASSERT_TRUE(Push(1, 0, {50, 50, 50, 50}).ok());
  EXPECT_EQ(store_.updates_applied(), 1);
  std::vector<KeyState> snap;
  ASSERT_TRUE(store_.Snapshot({}, &snap).ok());
  EXPECT_EQ(snap[0].version, 1);
  EXPECT_THAT(snap[0].values, ElementsAre(0, 1, 2, 3));
}

TEST_F(ShardStoreTest, RejectsBadPushes) {
  Setup(MergeMode::kSync, 2);
  absl::Status s = Push(0, 0, {1, 2, 3});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("3 elements"), HasSubstr("has 4"), HasSubstr("[2,2]")));

  s = Push(0, 0, {1, 2, 3, 4}, /*key=*/99);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("key 99"));

  s = Push(0, 3, {1, 2, 3, 4});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("step 3"), HasSubstr("version 0")));

  s = Push(2, 0, {1, 2, 3, 4});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("worker_rank 2"));

  auto pull = Pull(0, 0, absl::Seconds(1), /*key=*/99);
  ASSERT_TRUE(pull->has_value());
  EXPECT_EQ((*pull)->status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.updates_applied(), 0);
}

TEST_F(ShardStoreTest, NeedsConfigureAndKeepsItsConfig) {
  const float w[4] = {0, 0, 0, 0};
  EXPECT_EQ(store_.InitKey(kKey, {4}, w, 4).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.Push(0, 0, kKey, w, 4).code(), absl::StatusCode::kFailedPrecondition);
  Setup(MergeMode::kSync, 2);
  StoreConfig same;
  same.num_workers = 2;
  same.optimizer = Sgd(1.0);
  EXPECT_TRUE(store_.Configure(same).ok());
  StoreConfig other = same;
  other.num_workers = 3;
  absl::Status s = store_.Configure(other);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("num_workers 2 vs 3"));
  // Re-initialising a key with its shape keeps its weights; another shape is refused.
  EXPECT_TRUE(store_.InitKey(kKey, {2, 2}, w, 4).ok());
  std::vector<KeyState> snap;
  ASSERT_TRUE(store_.Snapshot({kKey}, &snap).ok());
  EXPECT_THAT(snap[0].values, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(store_.InitKey(kKey, {4}, w, 4).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.InitKey(8, {3}, w, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Snapshot({8}, &snap).code(), absl::StatusCode::kNotFound);
}

TEST_F(ShardStoreTest, ExpiredPullNamesMissingWorkers) {
  Setup(MergeMode::kSync, 3);
  store_.NoteHeardFrom(2);  // heard at kStart, then silent
  now_ = kStart + absl::Seconds(1);
  ASSERT_TRUE(Push(0, 0, {1, 1, 1, 1}).ok());
  auto pull = Pull(0, 1, absl::Seconds(30));
  store_.CheckDeadlines(kStart + absl::Seconds(20));
  EXPECT_FALSE(pull->has_value()) << "failed before its deadline";
  store_.CheckDeadlines(kStart + absl::Seconds(31));
  ASSERT_TRUE(pull->has_value());
  EXPECT_EQ((*pull)->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string((*pull)->status.message()),
              AllOf(HasSubstr("step 0 key 7"),
                    HasSubstr("waiting for worker 1 (never heard from), worker 2 (last heard 31 s ago)")));
  // The step itself is still open: the late workers can complete it.
  ASSERT_TRUE(Push(1, 0, {1, 1, 1, 1}).ok());
  ASSERT_TRUE(Push(2, 0, {1, 1, 1, 1}).ok());
  EXPECT_EQ(store_.updates_applied(), 1);
}

TEST_F(ShardStoreTest, LogsStillWaitingForStalledStep) {
  Setup(MergeMode::kSync, 3);
  store_.NoteHeardFrom(2);
  ASSERT_TRUE(Push(0, 0, {1, 1, 1, 1}).ok());
  auto pull = Pull(0, 1, absl::Minutes(5));
  ::testing::internal::CaptureStderr();
  store_.CheckDeadlines(kStart + absl::Seconds(5), absl::Seconds(10));  // not stalled long enough
  store_.CheckDeadlines(kStart + absl::Seconds(12), absl::Seconds(10));
  store_.CheckDeadlines(kStart + absl::Seconds(13), absl::Seconds(10));  // rate-limited
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("step 0 key 7: still waiting for worker 1 (never heard from), "
                             "worker 2 (last heard 12 s ago)"));
  EXPECT_EQ(err.find("still waiting"), err.rfind("still waiting")) << err;
  EXPECT_FALSE(pull->has_value());
}

TEST_F(ShardStoreTest, AsyncAppliesEachPushOnArrival) {
  Setup(MergeMode::kAsync, 2, Sgd(0.5));
  ASSERT_TRUE(Push(1, 0, {2, 2, 2, 2}).ok());
  auto pull = Pull(0, /*min_version=*/100);  // async never waits
  ASSERT_TRUE(pull->has_value());
  EXPECT_EQ((*pull)->version, 1);
  EXPECT_THAT((*pull)->data, ElementsAre(0, 1, 2, 3));
  ASSERT_TRUE(Push(0, 0, {2, 0, 0, 0}).ok());  // no averaging with worker 1's push
  ASSERT_TRUE(Push(0, 0, {9, 9, 9, 9}).ok());  // not newer than worker 0's last: ignored
  ASSERT_TRUE(Push(0, 1, {0, 2, 0, 0}).ok());
  std::vector<KeyState> snap;
  ASSERT_TRUE(store_.Snapshot({kKey}, &snap).ok());
  EXPECT_EQ(snap[0].version, 3);
  EXPECT_THAT(snap[0].values, ElementsAre(-1, 0, 2, 3));
}

TEST_F(ShardStoreTest, SnapshotAndResumeContinueIdentically) {
  OptimizerOptions opt = Sgd(0.1, 0.9);
  opt.weight_decay = 0.01;
  Setup(MergeMode::kSync, 2, opt, {0.5f, -1.5f, 2.25f, 3.0f});
  auto step = [](ShardStore& s, int64_t t) {
    const float g0[4] = {0.1f * t, -0.3f, 0.7f, 1.1f};
    const float g1[4] = {0.2f, 0.3f * t, -0.9f, 0.4f};
    ASSERT_TRUE(s.Push(1, t, kKey, g1, 4).ok());
    ASSERT_TRUE(s.Push(0, t, kKey, g0, 4).ok());
  };
  step(store_, 0);
  step(store_, 1);
  std::vector<KeyState> saved;
  ASSERT_TRUE(store_.Snapshot({}, &saved).ok());
  ASSERT_EQ(saved.size(), 1u);
  ASSERT_EQ(saved[0].optimizer_state.size(), 4u);
  EXPECT_NE(saved[0].optimizer_state[0], 0.0f);

  ShardStore resumed([this] { return now_; });
  StoreConfig c;
  c.num_workers = 2;
  c.optimizer = opt;
  ASSERT_TRUE(resumed.Configure(c).ok());
  const KeyState& k = saved[0];
  ASSERT_TRUE(resumed.InitKey(k.key, k.shape, k.values.data(), 4, k.version, k.optimizer_state).ok());
  for (int64_t t = 2; t < 5; ++t) {
    step(store_, t);
    step(resumed, t);
  }
  std::vector<KeyState> a, b;
  ASSERT_TRUE(store_.Snapshot({}, &a).ok());
  ASSERT_TRUE(resumed.Snapshot({}, &b).ok());
  EXPECT_EQ(a[0].version, 5);
  EXPECT_EQ(b[0].version, 5);
  EXPECT_EQ(std::memcmp(a[0].values.data(), b[0].values.data(), 4 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a[0].optimizer_state.data(), b[0].optimizer_state.data(), 4 * sizeof(float)), 0);
  // A wrongly sized state is refused.
  EXPECT_EQ(resumed.InitKey(9, {4}, k.values.data(), 4, 0, {1, 2}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ShardStoreTest, DestructionCancelsParkedPulls) {
  auto store = std::make_unique<ShardStore>([this] { return now_; });
  StoreConfig c;
  c.num_workers = 2;
  c.optimizer = Sgd(1.0);
  ASSERT_TRUE(store->Configure(c).ok());
  const float w[1] = {0};
  ASSERT_TRUE(store->InitKey(kKey, {1}, w, 1).ok());
  std::optional<absl::Status> got;
  store->Pull(0, kKey, 1, now_ + absl::Seconds(30),
              [&got](const absl::Status& s, int64_t, const float*, int64_t) { got = s; });
  EXPECT_FALSE(got.has_value());
  store.reset();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace dtrain::kv
