// The server's snapshot writer: a shard store training in sync mode leaves
// DIR/server-<rank>-step-<S>.snapshot every N steps, only the newest two stay, each
// reads back as the store was at S, and a restarted server finds them (not a corrupt one).
#include "services/server/snapshot_writer.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "common/file_io.h"
#include "common/kv/shard_snapshot.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::server {
namespace {

using ::testing::ElementsAre;

constexpr int kWorkers = 2;
constexpr int64_t kNumel = 3;
const std::vector<uint64_t> kKeys = {4, 9, 11};

void Configure(kv::ShardStore& store) {
  kv::StoreConfig c;
  c.num_workers = kWorkers;
  c.optimizer.momentum = 0.9;
  c.keep_previous_version = true;
  ASSERT_TRUE(store.Configure(c).ok());
  ASSERT_TRUE(store.SetJobId("job-a").ok());
  for (uint64_t key : kKeys) {
    std::vector<float> init(kNumel, 0.25f * static_cast<float>(key));
    ASSERT_TRUE(store.InitKey(key, {kNumel}, init.data(), kNumel).ok());
  }
}

void RunSteps(kv::ShardStore& s, int64_t from, int64_t to) {
  for (int64_t t = from; t < to; ++t) {
    for (int w = 0; w < kWorkers; ++w) {
      for (uint64_t key : kKeys) {
        std::vector<float> g(kNumel);
        for (int64_t i = 0; i < kNumel; ++i) g[i] = 0.01f * static_cast<float>(t + w + key + i) / 3.0f;
        ASSERT_TRUE(s.Push(w, t, key, g.data(), kNumel).ok());
      }
    }
  }
}

TEST(SnapshotWriterTest, WritesEveryNStepsKeepsTheNewestTwoAndAreExact) {
  testing::TempDir dir;
  kv::ShardStore store;
  SnapshotWriter writer({dir.path(), 2, 2}, &store, nullptr);
  Configure(store);
  writer.SetRank(1);
  RunSteps(store, 0, 7);
  ASSERT_TRUE(writer.WaitIdle(absl::Now() + absl::Seconds(10)));
  EXPECT_THAT(writer.complete_steps(), ElementsAre(6, 4));
  EXPECT_THAT(kv::ListShardSnapshotSteps(dir.path(), 1), ElementsAre(6, 4));

  kv::ShardStore replay;
  Configure(replay);
  RunSteps(replay, 0, 6);
  std::vector<kv::KeyState> want;
  ASSERT_TRUE(replay.Snapshot({}, &want).ok());
  absl::StatusOr<kv::ShardSnapshot> got = kv::ReadShardSnapshot(kv::ShardSnapshotPath(dir.path(), 1, 6));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->job_id, "job-a");
  EXPECT_EQ(got->config.num_workers, kWorkers);
  ASSERT_EQ(got->keys.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got->keys[i].key, want[i].key);
    EXPECT_EQ(got->keys[i].version, 6);
    EXPECT_EQ(0, std::memcmp(got->keys[i].values.data(), want[i].values.data(), kNumel * sizeof(float)));
    EXPECT_EQ(0,
              std::memcmp(got->keys[i].optimizer_state.data(), want[i].optimizer_state.data(), kNumel * sizeof(float)));
  }
}

TEST(SnapshotWriterTest, ARestartedServerFindsItsCompleteSnapshotsOnly) {
  testing::TempDir dir;
  {
    kv::ShardStore store;
    SnapshotWriter writer({dir.path(), 2, 2}, &store, nullptr);
    Configure(store);
    writer.SetRank(0);
    RunSteps(store, 0, 5);
    ASSERT_TRUE(writer.WaitIdle(absl::Now() + absl::Seconds(10)));
  }
  // The newest one is damaged on disk: the restarted server must not offer it.
  const std::string newest = kv::ShardSnapshotPath(dir.path(), 0, 4);
  absl::StatusOr<std::string> bytes = ReadFileLimited(newest, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[bytes->size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(newest, *bytes).ok());

  kv::ShardStore restarted;
  ASSERT_TRUE(restarted.SetJobId("job-a").ok());
  SnapshotWriter writer({dir.path(), 2, 2}, &restarted, nullptr);
  writer.SetRank(0);
  EXPECT_THAT(writer.complete_steps(), ElementsAre(2));
}

}  // namespace
}  // namespace dtrain::server
