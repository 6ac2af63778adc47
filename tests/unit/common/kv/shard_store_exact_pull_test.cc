// ShardStore::Pull with PullMode::kExact: the weights of exactly one version, the
// current one or (sync, StoreConfig::keep_previous_version) the one before it, for a
// worker redoing a step that some keys already merged (docs/recovery.md).
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kKey = 7;
const absl::Time kStart = absl::FromUnixSeconds(1700000000);

struct PullResult {
  absl::Status status;
  int64_t version = -1;
  std::vector<float> data;
};

class ExactPullTest : public ::testing::Test {
 protected:
  ExactPullTest() : store_([this] { return now_; }) {}

  // SGD with lr 1: each merged step subtracts the mean gradient.
  void Setup(MergeMode mode, int num_workers, bool keep_previous = true, int64_t version = 0) {
    StoreConfig c;
    c.mode = mode;
    c.num_workers = num_workers;
    c.optimizer.learning_rate = 1.0;
    c.keep_previous_version = keep_previous;
    ASSERT_TRUE(store_.Configure(c).ok());
    const std::vector<float> init = {1, 2, 3, 4};
    ASSERT_TRUE(store_.InitKey(kKey, {4}, init.data(), 4, version).ok());
  }

  absl::Status Push(int worker, int64_t step, std::vector<float> g) {
    return store_.Push(worker, step, kKey, g.data(), static_cast<int64_t>(g.size()));
  }

  // Every worker pushes `g` for `step`: the step merges, the weights drop by g.
  void Step(int num_workers, int64_t step, std::vector<float> g) {
    for (int w = 0; w < num_workers; ++w) ASSERT_TRUE(Push(w, step, g).ok());
  }

  std::shared_ptr<std::optional<PullResult>> Pull(int worker, int64_t version, PullMode mode = PullMode::kExact,
                                                  absl::Duration timeout = absl::Seconds(30)) {
    auto slot = std::make_shared<std::optional<PullResult>>();
    store_.Pull(
        worker, kKey, version, now_ + timeout,
        [slot](const absl::Status& s, int64_t v, const float* data, int64_t numel) {
          PullResult r{s, v, {}};
          if (data != nullptr) r.data.assign(data, data + numel);
          *slot = std::move(r);
        },
        /*owner=*/0, mode);
    return slot;
  }

  absl::Time now_ = kStart;
  ShardStore store_;
};

TEST_F(ExactPullTest, CurrentAndPreviousVersionsAreAnsweredAsAsked) {
  Setup(MergeMode::kSync, 2);
  Step(2, 0, {0.5f, 0.5f, 0.5f, 0.5f});

  auto current = Pull(1, 1);
  ASSERT_TRUE(current->has_value()) << "the current version answers at once";
  ASSERT_TRUE((*current)->status.ok()) << (*current)->status;
  EXPECT_EQ((*current)->version, 1);
  EXPECT_THAT((*current)->data, ElementsAre(0.5f, 1.5f, 2.5f, 3.5f));

  auto previous = Pull(1, 0);
  ASSERT_TRUE(previous->has_value()) << "the previous version answers at once";
  ASSERT_TRUE((*previous)->status.ok()) << (*previous)->status;
  EXPECT_EQ((*previous)->version, 0) << "the answer's version is that of its data";
  EXPECT_THAT((*previous)->data, ElementsAre(1, 2, 3, 4));

  auto at_least = Pull(1, 0, PullMode::kAtLeast);
  ASSERT_TRUE(at_least->has_value());
  EXPECT_EQ((*at_least)->version, 1) << "a plain pull is unchanged: the current weights";
}

// The copy is taken at every merge, so after any step the previous version is the
// weights the step was computed from; with one worker the step merges on its push.
TEST_F(ExactPullTest, ThePreviousVersionFollowsEveryMerge) {
  Setup(MergeMode::kSync, 1);
  for (int64_t t = 0; t < 4; ++t) {
    auto before = Pull(0, t, PullMode::kAtLeast);
    ASSERT_TRUE(before->has_value() && (*before)->status.ok());
    ASSERT_TRUE(Push(0, t, {0.25f * static_cast<float>(t + 1), 1.0f, -1.0f, 0.125f}).ok());
    auto previous = Pull(0, t);
    ASSERT_TRUE(previous->has_value());
    ASSERT_TRUE((*previous)->status.ok()) << (*previous)->status;
    EXPECT_EQ((*previous)->version, t);
    EXPECT_EQ((*previous)->data, (*before)->data) << "step " << t;
  }
}

TEST_F(ExactPullTest, AVersionOlderThanThePreviousIsRefusedNamingWhatIsHeld) {
  Setup(MergeMode::kSync, 2);
  Step(2, 0, {1, 1, 1, 1});
  Step(2, 1, {1, 1, 1, 1});
  auto old = Pull(1, 0);
  ASSERT_TRUE(old->has_value()) << "refused at once, not parked";
  EXPECT_EQ((*old)->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*old)->status.message(),
            "exact pull of key 7 version 0 by worker 1: the key holds version 2 and its "
            "previous, 1");
  EXPECT_TRUE((*old)->data.empty());
  EXPECT_EQ(store_.parked_pulls(), 0);
}

TEST_F(ExactPullTest, BeforeAnyMergeOnlyTheCurrentVersionIsHeld) {
  Setup(MergeMode::kSync, 2, /*keep_previous=*/true, /*version=*/5);  // resumed at 5
  auto at4 = Pull(0, 4);
  ASSERT_TRUE(at4->has_value());
  EXPECT_EQ((*at4)->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*at4)->status.message(),
            "exact pull of key 7 version 4 by worker 0: the key holds version 5 only (no "
            "step has merged on this server yet)");
  auto at5 = Pull(0, 5);
  ASSERT_TRUE(at5->has_value());
  EXPECT_TRUE((*at5)->status.ok()) << (*at5)->status;
  EXPECT_EQ((*at5)->version, 5);
}

TEST_F(ExactPullTest, AStoreThatKeepsNoPreviousVersionAnswersOnlyTheCurrentAndHoldsTheWeightsOnce) {
  Setup(MergeMode::kSync, 1, /*keep_previous=*/false);
  EXPECT_EQ(store_.bytes_held(), 16) << "4 floats of weights, no optimizer state (plain SGD)";
  Step(1, 0, {1, 1, 1, 1});
  auto previous = Pull(0, 0);
  ASSERT_TRUE(previous->has_value());
  EXPECT_EQ((*previous)->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string((*previous)->status.message()),
              HasSubstr("the key holds version 1 only (this store keeps no previous version)"));
  auto current = Pull(0, 1);
  ASSERT_TRUE(current->has_value());
  EXPECT_TRUE((*current)->status.ok()) << (*current)->status;
}

TEST_F(ExactPullTest, TheKeptCopyIsCountedInTheBytesHeld) {
  Setup(MergeMode::kSync, 1, /*keep_previous=*/true);
  EXPECT_EQ(store_.bytes_held(), 32) << "the weights twice: current and previous";
}

TEST_F(ExactPullTest, AsyncIsRefusedAndKeepsNoCopy) {
  Setup(MergeMode::kAsync, 2, /*keep_previous=*/true);
  EXPECT_EQ(store_.bytes_held(), 16) << "async keeps no previous version, whatever the config says";
  auto r = Pull(0, 0);
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*r)->status.message(),
            "exact pull of key 7 version 0 by worker 0: exact pulls are for dist_sync; this server runs async");
  auto plain = Pull(0, 0, PullMode::kAtLeast);
  ASSERT_TRUE(plain->has_value());
  EXPECT_TRUE((*plain)->status.ok()) << "plain pulls are unchanged";
}

TEST_F(ExactPullTest, AVersionAheadParksUntilItIsCurrent) {
  Setup(MergeMode::kSync, 2);
  auto ahead = Pull(1, 2);
  EXPECT_FALSE(ahead->has_value());
  EXPECT_EQ(store_.parked_pulls(), 1);
  Step(2, 0, {1, 1, 1, 1});
  EXPECT_FALSE(ahead->has_value()) << "version 1 is not the one asked for";
  ASSERT_TRUE(Push(0, 1, {2, 2, 2, 2}).ok());
  EXPECT_FALSE(ahead->has_value()) << "step 1 still waits for worker 1";
  ASSERT_TRUE(Push(1, 1, {2, 2, 2, 2}).ok());
  ASSERT_TRUE(ahead->has_value());
  ASSERT_TRUE((*ahead)->status.ok()) << (*ahead)->status;
  EXPECT_EQ((*ahead)->version, 2);
  EXPECT_THAT((*ahead)->data, ElementsAre(-2, -1, 0, 1));
  EXPECT_EQ(store_.parked_pulls(), 0);
}

TEST_F(ExactPullTest, AParkedExactPullTimesOutNamingTheMissingWorker) {
  Setup(MergeMode::kSync, 2);
  auto ahead = Pull(1, 1, PullMode::kExact, absl::Seconds(5));
  ASSERT_TRUE(Push(1, 0, {1, 1, 1, 1}).ok());
  now_ += absl::Seconds(6);
  store_.CheckDeadlines(now_);
  ASSERT_TRUE(ahead->has_value());
  EXPECT_EQ((*ahead)->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string((*ahead)->status.message()), HasSubstr("waiting for worker 0"));
}

TEST(StoreConfigTest, KeepingThePreviousVersionIsPartOfTheConfig) {
  StoreConfig a, b;
  b.keep_previous_version = true;
  EXPECT_EQ(DescribeConfigDiff(a, b), "keep_previous_version false vs true");
  ShardStore store;
  ASSERT_TRUE(store.Configure(a).ok());
  const absl::Status s = store.Configure(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dtrain::kv
