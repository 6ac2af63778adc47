// What no request may make a shard store hold: more workers, keys or bytes than its
// StoreLimits, per-worker state before the workers come, or the parked pulls of a
// stream that is gone.
#include <fstream>
#include <string>
#include <vector>

#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::HasSubstr;

// This process's resident set, from /proc/self/status.
int64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

absl::Status ConfigureSync(ShardStore& store, int num_workers) {
  StoreConfig c;
  c.num_workers = num_workers;
  c.optimizer.learning_rate = 0.1;
  c.optimizer.momentum = 0.9;  // one state slot per element
  return store.Configure(c);
}

TEST(StoreLimitsTest, NumWorkersOverTheCapNamesItAndTheFlag) {
  ShardStore store;
  StoreLimits limits;
  limits.max_workers = 8;
  store.SetLimits(limits);
  const absl::Status s = ConfigureSync(store, 100000000);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "num_workers 100000000 is over this server's cap of 8 workers (--max-workers)");
  EXPECT_FALSE(store.configured());
  EXPECT_TRUE(ConfigureSync(store, 8).ok());
}

TEST(StoreLimitsTest, DefaultCapRefusesAHundredMillionWorkers) {
  ShardStore store;
  EXPECT_EQ(ConfigureSync(store, 100000000).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StoreLimitsTest, PerWorkerStateIsNotAllocatedBeforeTheWorkersCome) {
  ShardStore store;
  StoreLimits limits;
  limits.max_workers = 4000000;
  store.SetLimits(limits);
  ASSERT_TRUE(ConfigureSync(store, 4000000).ok());
  const int64_t before = RssBytes();
  // 100 tiny keys: sized for every worker up front, that is ~100 * 4e6 * 57 bytes.
  const float one = 1.0f;
  for (uint64_t key = 0; key < 100; ++key) ASSERT_TRUE(store.InitKey(key, {1}, &one, 1).ok());
  ASSERT_TRUE(store.Push(3, 0, 5, &one, 1).ok());
  const int64_t grown = RssBytes() - before;
  EXPECT_LT(grown, int64_t{64} << 20) << "RSS grew by " << grown << " bytes";
}

TEST(StoreLimitsTest, KeysOverTheCapNameItAndTheFlag) {
  ShardStore store;
  StoreLimits limits;
  limits.max_keys = 2;
  store.SetLimits(limits);
  ASSERT_TRUE(ConfigureSync(store, 1).ok());
  const float v = 1.0f;
  ASSERT_TRUE(store.InitKey(1, {1}, &v, 1).ok());
  ASSERT_TRUE(store.InitKey(2, {1}, &v, 1).ok());
  EXPECT_TRUE(store.InitKey(2, {1}, &v, 1).ok()) << "re-initialising a held key costs nothing";
  const absl::Status s = store.InitKey(3, {1}, &v, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "key 3: this server already holds 2 keys, its cap (--max-keys 2)");
  EXPECT_EQ(store.num_keys(), 2);
}

TEST(StoreLimitsTest, BytesOverTheCapNameItAndTheFlag) {
  ShardStore store;
  StoreLimits limits;
  limits.max_bytes = 100;  // momentum: 8 bytes per element (weight + state)
  store.SetLimits(limits);
  ASSERT_TRUE(ConfigureSync(store, 1).ok());
  const std::vector<float> ten(10, 1.0f);
  ASSERT_TRUE(store.InitKey(1, {10}, ten.data(), 10).ok());
  EXPECT_EQ(store.bytes_held(), 80);
  const absl::Status s = store.InitKey(2, {3}, ten.data(), 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "key 2: its 24 bytes of weights and optimizer state would take this server to 104 bytes, over its cap "
            "of 100 (--max-shard-bytes)");
  EXPECT_TRUE(store.InitKey(3, {1}, ten.data(), 1).ok());
  EXPECT_EQ(store.bytes_held(), 88);
}

TEST(StoreLimitsTest, ShapesWhoseProductOverflowsAreRefused) {
  ShardStore store;
  ASSERT_TRUE(ConfigureSync(store, 1).ok());
  const float v = 1.0f;
  // 2^32 * 2^32 wraps to 0 in int64 arithmetic, and 0 elements would "match" no values.
  const int64_t big = int64_t{1} << 32;
  const absl::Status s = store.InitKey(1, {big, big}, &v, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("does not hold 0 elements"));
  EXPECT_EQ(store.InitKey(2, {-1, -1}, &v, 1).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status dims = store.InitKey(3, std::vector<int64_t>(1000, 1), &v, 1);
  EXPECT_EQ(dims.message(), "key 3: shape has 1000 dimensions, more than 32");
  EXPECT_EQ(store.num_keys(), 0);
}

TEST(StoreLimitsTest, DropPullsFailsAndForgetsOnlyThatOwnersParkedPulls) {
  ShardStore store;
  ASSERT_TRUE(ConfigureSync(store, 2).ok());
  const float v = 1.0f;
  ASSERT_TRUE(store.InitKey(1, {1}, &v, 1).ok());
  ASSERT_TRUE(store.InitKey(2, {1}, &v, 1).ok());
  std::vector<std::string> results;
  auto record = [&results](const std::string& who) {
    return [&results, who](const absl::Status& s, int64_t, const float*, int64_t) {
      results.push_back(who + ": " + std::string(absl::StatusCodeToString(s.code())) + " " + std::string(s.message()));
    };
  };
  const absl::Time later = absl::Now() + absl::Hours(1);
  store.Pull(0, 1, 1, later, record("a1"), /*owner=*/11);
  store.Pull(0, 2, 1, later, record("a2"), /*owner=*/11);
  store.Pull(1, 1, 1, later, record("b1"), /*owner=*/22);
  EXPECT_EQ(store.parked_pulls(), 3);
  EXPECT_EQ(store.DropPulls(11), 2);
  EXPECT_EQ(store.parked_pulls(), 1);
  EXPECT_THAT(results, ::testing::ElementsAre("a1: CANCELLED key 1: the stream that asked is gone",
                                              "a2: CANCELLED key 2: the stream that asked is gone"));
  EXPECT_EQ(store.DropPulls(11), 0);
  // The other owner's pull is still answered by the step's merge.
  ASSERT_TRUE(store.Push(0, 0, 1, &v, 1).ok());
  ASSERT_TRUE(store.Push(1, 0, 1, &v, 1).ok());
  EXPECT_EQ(store.parked_pulls(), 0);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[2], "b1: OK ");
}

}  // namespace
}  // namespace dtrain::kv
