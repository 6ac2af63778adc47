// Server snapshot files: a shard written at a step boundary reads back bit
// for bit with its configuration; a corrupt, truncated or foreign file is refused
// (and named) instead of being loaded; only exactly-named files count.
#include "common/kv/shard_snapshot.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ShardSnapshot Sample(int rank, int64_t step) {
  ShardSnapshot s;
  s.server_rank = rank;
  s.step = step;
  s.job_id = "job-a";
  s.config.mode = MergeMode::kSync;
  s.config.num_workers = 2;
  s.config.keep_previous_version = true;
  s.config.optimizer.name = "sgd";
  s.config.optimizer.learning_rate = 0.05;
  s.config.optimizer.momentum = 0.9;
  s.config.optimizer.lr_factor = 0.5;
  s.config.optimizer.lr_steps = {100, 200};
  for (uint64_t key : {3, 7}) {
    KeyState k;
    k.key = key;
    k.shape = {2, 3};
    k.version = step;
    for (int i = 0; i < 6; ++i) {
      k.values.push_back(0.1f * static_cast<float>(i) / 3.0f + static_cast<float>(key));
      k.optimizer_state.push_back(-0.01f * static_cast<float>(i * key) / 7.0f);
    }
    s.keys.push_back(k);
  }
  return s;
}

TEST(ShardSnapshotTest, RoundTripIsBitExactWithTheConfiguration) {
  testing::TempDir dir;
  const ShardSnapshot want = Sample(1, 800);
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), want).ok());
  const std::string path = ShardSnapshotPath(dir.path(), 1, 800);
  EXPECT_EQ(std::filesystem::path(path).filename(), "server-1-step-800.snapshot");
  absl::StatusOr<ShardSnapshot> got = ReadShardSnapshot(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->server_rank, 1);
  EXPECT_EQ(got->step, 800);
  EXPECT_EQ(got->job_id, "job-a");
  EXPECT_EQ(DescribeConfigDiff(got->config, want.config), "");
  EXPECT_TRUE(got->config.keep_previous_version);
  ASSERT_EQ(got->keys.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got->keys[i].key, want.keys[i].key);
    EXPECT_EQ(got->keys[i].shape, want.keys[i].shape);
    EXPECT_EQ(got->keys[i].version, 800);
    EXPECT_EQ(0, std::memcmp(got->keys[i].values.data(), want.keys[i].values.data(), 6 * sizeof(float)));
    EXPECT_EQ(0,
              std::memcmp(got->keys[i].optimizer_state.data(), want.keys[i].optimizer_state.data(), 6 * sizeof(float)));
  }
}

// An elastic job's lr schedule in epochs travels with the configuration, so that a
// server restarted from the snapshot applies it as its predecessor did.
TEST(ShardSnapshotTest, AnElasticJobsEpochLrStepsComeBack) {
  testing::TempDir dir;
  ShardSnapshot want = Sample(0, 40);
  want.config.optimizer.lr_steps.clear();
  want.config.epoch_lr = {3000, 64, {2, 5}};
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), want).ok());
  absl::StatusOr<ShardSnapshot> got = ReadShardSnapshot(ShardSnapshotPath(dir.path(), 0, 40));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->config.epoch_lr == want.config.epoch_lr);
  EXPECT_EQ(DescribeConfigDiff(got->config, want.config), "");
}

TEST(ShardSnapshotTest, AKeyOfAnotherStepIsNotWritten) {
  testing::TempDir dir;
  ShardSnapshot s = Sample(0, 50);
  s.keys[1].version = 49;
  const absl::Status st = WriteShardSnapshot(dir.path(), s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("key 7 at version 49"));
  EXPECT_TRUE(ListShardSnapshotSteps(dir.path(), 0).empty());
}

TEST(ShardSnapshotTest, CorruptAndTruncatedFilesAreRefusedAndNamed) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), Sample(0, 100)).ok());
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), Sample(0, 150)).ok());
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), Sample(0, 200)).ok());
  const std::string flipped = ShardSnapshotPath(dir.path(), 0, 200);
  const std::string cut = ShardSnapshotPath(dir.path(), 0, 150);
  absl::StatusOr<std::string> bytes = ReadFileLimited(flipped, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[40] ^= 0x10;
  ASSERT_TRUE(WriteFileAtomically(flipped, *bytes).ok());
  bytes = ReadFileLimited(cut, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(WriteFileAtomically(cut, bytes->substr(0, bytes->size() / 2)).ok());

  for (const std::string& path : {flipped, cut}) {
    const absl::StatusOr<ShardSnapshot> r = ReadShardSnapshot(path);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << path;
    EXPECT_THAT(r.status().message(), HasSubstr(path));
  }
  EXPECT_THAT(ListShardSnapshotSteps(dir.path(), 0), ElementsAre(200, 150, 100));
  EXPECT_THAT(CompleteShardSnapshotSteps(dir.path(), 0, "job-a"), ElementsAre(100));
}

TEST(ShardSnapshotTest, OnlyThisRanksExactNamesOfThisJobCount) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), Sample(0, 10)).ok());
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), Sample(1, 20)).ok());
  ShardSnapshot other = Sample(0, 30);
  other.job_id = "job-b";
  ASSERT_TRUE(WriteShardSnapshot(dir.path(), other).ok());
  for (const char* name : {"server-0-step-040.snapshot", "server-0-step-50.snapshot.tmp.1", "server-0-step-.snapshot",
                           "server-00-step-60.snapshot"}) {
    std::ofstream(dir.File(name)) << "x";
  }
  EXPECT_THAT(ListShardSnapshotSteps(dir.path(), 0), ElementsAre(30, 10));
  EXPECT_THAT(ListShardSnapshotSteps(dir.path(), 1), ElementsAre(20));
  EXPECT_THAT(CompleteShardSnapshotSteps(dir.path(), 0, "job-a"), ElementsAre(10));
  EXPECT_THAT(CompleteShardSnapshotSteps(dir.path(), 0, ""), ElementsAre(30, 10));
  ASSERT_TRUE(RemoveShardSnapshot(dir.path(), 0, 30).ok());
  ASSERT_TRUE(RemoveShardSnapshot(dir.path(), 0, 30).ok()) << "removing what is gone is not an error";
  EXPECT_THAT(ListShardSnapshotSteps(dir.path(), 0), ElementsAre(10));
  EXPECT_TRUE(ListShardSnapshotSteps(dir.File("absent"), 0).empty());
}

}  // namespace
}  // namespace dtrain::kv
