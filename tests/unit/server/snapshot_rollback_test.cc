// A server carrying out the scheduler's rollback order: a restarted server
// (never configured) configures itself from its snapshot and loads it; a live one
// restores; each order is acknowledged once in the report; a damaged snapshot is not
// acknowledged (the scheduler's deadline then names this server).
#include "services/server/snapshot_rollback.h"

#include <cstring>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "common/kv/shard_snapshot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::server {
namespace {

constexpr int kWorkers = 2;
constexpr int64_t kNumel = 3;
const std::vector<uint64_t> kKeys = {5, 8};

void Configure(kv::ShardStore& store) {
  kv::StoreConfig c;
  c.num_workers = kWorkers;
  c.optimizer.momentum = 0.9;
  c.keep_previous_version = true;
  ASSERT_TRUE(store.Configure(c).ok());
  for (uint64_t key : kKeys) {
    std::vector<float> init(kNumel, 0.5f * static_cast<float>(key));
    ASSERT_TRUE(store.InitKey(key, {kNumel}, init.data(), kNumel).ok());
  }
}

void RunSteps(kv::ShardStore& s, int64_t from, int64_t to) {
  for (int64_t t = from; t < to; ++t) {
    for (int w = 0; w < kWorkers; ++w) {
      for (uint64_t key : kKeys) {
        std::vector<float> g(kNumel);
        for (int64_t i = 0; i < kNumel; ++i) g[i] = 0.02f * static_cast<float>(t * 3 + w + key + i) / 7.0f;
        ASSERT_TRUE(s.Push(w, t, key, g.data(), kNumel).ok());
      }
    }
  }
}

struct Reports {
  absl::Mutex mu;
  std::vector<v1::SnapshotReport> got;
  SnapshotRollback::Reporter reporter() {
    return [this](const v1::SnapshotReport& r) {
      absl::MutexLock lock(&mu);
      got.push_back(r);
    };
  }
  v1::SnapshotReport last() {
    absl::MutexLock lock(&mu);
    return got.empty() ? v1::SnapshotReport() : got.back();
  }
};

v1::RollbackOrder Order(uint64_t generation, int64_t step) {
  v1::RollbackOrder o;
  o.set_generation(generation);
  o.set_step(step);
  o.set_reason("test");
  return o;
}

void ExpectSameWeights(const kv::ShardStore& a, const kv::ShardStore& b) {
  std::vector<kv::KeyState> x, y;
  ASSERT_TRUE(a.Snapshot({}, &x).ok());
  ASSERT_TRUE(b.Snapshot({}, &y).ok());
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].version, y[i].version);
    EXPECT_EQ(0, std::memcmp(x[i].values.data(), y[i].values.data(), kNumel * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(x[i].optimizer_state.data(), y[i].optimizer_state.data(), kNumel * sizeof(float)));
  }
}

TEST(SnapshotRollbackTest, LiveAndRestartedServersReloadTheStepAndAcknowledgeOnce) {
  testing::TempDir dir;
  kv::ShardStore live;
  SnapshotWriter writer({dir.path(), 4, 2}, &live, nullptr);
  Reports reports;
  SnapshotRollback rollback(dir.path(), &live, &writer, reports.reporter());
  Configure(live);
  writer.SetRank(0);
  rollback.Start(0);
  EXPECT_TRUE(reports.last().listed());
  RunSteps(live, 0, 6);
  ASSERT_TRUE(writer.WaitIdle(absl::Now() + absl::Seconds(10)));
  rollback.Report();
  ASSERT_EQ(reports.last().complete_steps_size(), 1);
  EXPECT_EQ(reports.last().complete_steps(0), 4);

  rollback.OnOrder(Order(1, 4));
  EXPECT_EQ(reports.last().rollback_done(), 1u);
  EXPECT_EQ(live.Step(), 4);
  const size_t reported = reports.got.size();
  rollback.OnOrder(Order(1, 4));
  EXPECT_EQ(reports.got.size(), reported) << "an order is carried out once";

  kv::ShardStore uninterrupted;
  Configure(uninterrupted);
  RunSteps(uninterrupted, 0, 4);
  ExpectSameWeights(live, uninterrupted);

  // A restarted process of the same rank: no Configure from anybody.
  kv::ShardStore restarted;
  SnapshotWriter writer2({dir.path(), 4, 2}, &restarted, nullptr);
  Reports reports2;
  SnapshotRollback rollback2(dir.path(), &restarted, &writer2, reports2.reporter());
  writer2.SetRank(0);
  rollback2.Start(0);
  rollback2.OnOrder(Order(1, 4));
  EXPECT_EQ(reports2.last().rollback_done(), 1u);
  ASSERT_TRUE(restarted.configured());
  ExpectSameWeights(restarted, uninterrupted);
  // And it trains on exactly as the uninterrupted run does.
  RunSteps(restarted, 4, 7);
  RunSteps(uninterrupted, 4, 7);
  ExpectSameWeights(restarted, uninterrupted);
}

TEST(SnapshotRollbackTest, ADamagedSnapshotIsNotAcknowledged) {
  testing::TempDir dir;
  kv::ShardStore live;
  SnapshotWriter writer({dir.path(), 2, 2}, &live, nullptr);
  Reports reports;
  SnapshotRollback rollback(dir.path(), &live, &writer, reports.reporter());
  Configure(live);
  writer.SetRank(1);
  rollback.Start(1);
  RunSteps(live, 0, 3);
  ASSERT_TRUE(writer.WaitIdle(absl::Now() + absl::Seconds(10)));
  const std::string path = kv::ShardSnapshotPath(dir.path(), 1, 2);
  absl::StatusOr<std::string> bytes = ReadFileLimited(path, 1 << 20);
  ASSERT_TRUE(bytes.ok());
  (*bytes)[20] ^= 4;
  ASSERT_TRUE(WriteFileAtomically(path, *bytes).ok());
  rollback.OnOrder(Order(1, 2));
  EXPECT_EQ(reports.last().rollback_done(), 0u);
  EXPECT_EQ(live.Step(), 3) << "nothing restored from a damaged file";
}

}  // namespace
}  // namespace dtrain::server
