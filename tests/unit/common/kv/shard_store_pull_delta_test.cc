// Pull compression in the shard store (--pull-gc-type): each merged step's
// weight change is packed once; a worker holding the step's weights that adds the
// unpacked change gets the store's new weights bit for bit; the residual (the last
// state slot) carries what packing lost, so weights + residual follow the uncompressed
// optimizer; and wherever the store cannot vouch for the worker's copy it answers the
// weights instead.
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/kv/compression/gradient_codec.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kKey = 3;
constexpr int64_t kNumel = 37;  // not a multiple of anything the codecs pack by

StoreConfig SyncConfig(int workers, CompressionType pull, double momentum = 0.0) {
  StoreConfig c;
  c.mode = MergeMode::kSync;
  c.num_workers = workers;
  c.optimizer.learning_rate = 0.05;
  c.optimizer.momentum = momentum;
  c.keep_previous_version = true;
  c.pull_compression = pull;
  return c;
}

std::vector<float> Init() {
  std::vector<float> w(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) w[i] = 0.3f * std::sin(0.7f * static_cast<float>(i));
  return w;
}

std::vector<float> Grad(int worker, int64_t step) {
  std::vector<float> g(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) {
    g[i] = std::cos(0.37f * static_cast<float>(i * (worker + 2)) + 0.11f * static_cast<float>(step)) *
           (1.0f + 0.5f * static_cast<float>(i % 5));
  }
  return g;
}

// What a PullDelta delivered.
struct Got {
  absl::Status status;
  int64_t version = -1;
  std::vector<float> weights;
  std::string delta;
  CompressionType type = CompressionType::kNone;
};

Got PullDeltaNow(ShardStore& s, int worker, int64_t min_version, int64_t held) {
  Got got;
  s.PullDelta(worker, kKey, min_version, held, absl::InfiniteFuture(),
              [&](const absl::Status& st, const PullAnswer& a) {
                got.status = st;
                got.version = a.version;
                if (a.data != nullptr) got.weights.assign(a.data, a.data + a.numel);
                if (a.delta != nullptr) got.delta.assign(a.delta, static_cast<size_t>(a.delta_bytes));
                got.type = a.delta_type;
              });
  return got;
}

void Step(ShardStore& s, int workers, int64_t step) {
  for (int w = 0; w < workers; ++w) {
    const std::vector<float> g = Grad(w, step);
    ASSERT_TRUE(s.Push(w, step, kKey, g.data(), kNumel).ok());
  }
}

std::vector<float> State(ShardStore& s) {
  std::vector<KeyState> out;
  EXPECT_TRUE(s.Snapshot({kKey}, &out).ok());
  return out.empty() ? std::vector<float>{} : out[0].optimizer_state;
}

class PullDeltaTest : public ::testing::TestWithParam<CompressionType> {};

TEST_P(PullDeltaTest, WorkerAddingTheUnpackedChangeHoldsTheStoresWeightsBitForBit) {
  ShardStore s;
  ASSERT_TRUE(s.Configure(SyncConfig(2, GetParam(), /*momentum=*/0.9)).ok());
  const std::vector<float> init = Init();
  ASSERT_TRUE(s.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  const std::unique_ptr<GradientCodec> codec = MakeCodec({GetParam(), 1.0f});
  std::vector<float> worker0 = init, worker1 = init;  // what two workers hold
  for (int64_t step = 0; step < 50; ++step) {
    Step(s, 2, step);
    for (std::vector<float>* held : {&worker0, &worker1}) {
      const Got got = PullDeltaNow(s, held == &worker0 ? 0 : 1, step + 1, /*held=*/step);
      ASSERT_TRUE(got.status.ok()) << got.status;
      ASSERT_EQ(got.version, step + 1);
      ASSERT_EQ(got.type, GetParam());
      ASSERT_EQ(static_cast<int64_t>(got.delta.size()), codec->PackedBytes(kNumel));
      std::vector<float> d(kNumel);
      ASSERT_TRUE(codec->Decode(got.delta.data(), static_cast<int64_t>(got.delta.size()), d.data(), kNumel).ok());
      for (int64_t i = 0; i < kNumel; ++i) (*held)[i] += d[i];
      ASSERT_EQ(std::memcmp(held->data(), got.weights.data(), kNumel * sizeof(float)), 0)
          << "step " << step << ": the worker's copy left the store's weights";
    }
  }
  EXPECT_EQ(worker0, worker1);
}

INSTANTIATE_TEST_SUITE_P(Codecs, PullDeltaTest,
                         ::testing::Values(CompressionType::kInt8, CompressionType::kFp16, CompressionType::kOneBit),
                         [](const auto& info) {
                           return std::string(CompressionTypeName(info.param)) == "1bit"
                                      ? std::string("OneBit")
                                      : std::string(CompressionTypeName(info.param));
                         });

TEST(PullDeltaStoreTest, WeightsPlusResidualFollowTheUncompressedOptimizer) {
  // Plain SGD's change does not depend on the weights, so the uncompressed run's weights
  // are the packed run's plus what packing still owes (the residual): error feedback.
  ShardStore packed, plain;
  ASSERT_TRUE(packed.Configure(SyncConfig(1, CompressionType::kInt8)).ok());
  ASSERT_TRUE(plain.Configure(SyncConfig(1, CompressionType::kNone)).ok());
  const std::vector<float> init = Init();
  ASSERT_TRUE(packed.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  ASSERT_TRUE(plain.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  ASSERT_EQ(State(packed).size(), static_cast<size_t>(kNumel)) << "sgd without momentum: the residual only";
  for (int64_t step = 0; step < 200; ++step) {
    Step(packed, 1, step);
    Step(plain, 1, step);
  }
  const Got a = PullDeltaNow(packed, 0, 200, -1);
  const Got b = PullDeltaNow(plain, 0, 200, -1);
  const std::vector<float> residual = State(packed);
  double max_residual = 0;
  for (int64_t i = 0; i < kNumel; ++i) {
    EXPECT_NEAR(a.weights[i] + residual[i], b.weights[i], 1e-4) << i;
    max_residual = std::max(max_residual, std::fabs(static_cast<double>(residual[i])));
  }
  // One step's change is at most lr * 3 (|grad| <= 3): int8 owes at most half a quantum of it.
  EXPECT_LT(max_residual, 0.05 * 3 / 127.0);
  EXPECT_GT(max_residual, 0) << "int8 packing lost nothing: the test does not test anything";
}

TEST(PullDeltaStoreTest, AnswersTheWeightsWhereItCannotVouchForTheWorkersCopy) {
  ShardStore s;
  ASSERT_TRUE(s.Configure(SyncConfig(1, CompressionType::kFp16)).ok());
  const std::vector<float> init = Init();
  ASSERT_TRUE(s.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  // Nothing merged yet: no change packed.
  EXPECT_TRUE(PullDeltaNow(s, 0, 0, 0).delta.empty());
  Step(s, 1, 0);
  Step(s, 1, 1);
  EXPECT_FALSE(PullDeltaNow(s, 0, 2, 1).delta.empty());
  EXPECT_TRUE(PullDeltaNow(s, 0, 2, 0).delta.empty()) << "two steps behind: only the weights will do";
  EXPECT_TRUE(PullDeltaNow(s, 0, 2, -1).delta.empty()) << "a plain pull";
  // A rollback's weights are another timeline's: the packed change is not from them.
  std::vector<KeyState> snap;
  ASSERT_TRUE(s.Snapshot({kKey}, &snap).ok());
  ASSERT_TRUE(s.Restore(snap, 2).ok());
  EXPECT_TRUE(PullDeltaNow(s, 0, 2, 1).delta.empty());
  Step(s, 1, 2);
  EXPECT_FALSE(PullDeltaNow(s, 0, 3, 2).delta.empty());
}

TEST(PullDeltaStoreTest, ParkedPullGetsTheChangeWhenTheStepMerges) {
  ShardStore s;
  ASSERT_TRUE(s.Configure(SyncConfig(2, CompressionType::kInt8)).ok());
  const std::vector<float> init = Init();
  ASSERT_TRUE(s.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  const std::vector<float> g0 = Grad(0, 0);
  ASSERT_TRUE(s.Push(0, 0, kKey, g0.data(), kNumel).ok());
  std::optional<Got> got;
  s.PullDelta(0, kKey, 1, 0, absl::InfiniteFuture(), [&](const absl::Status& st, const PullAnswer& a) {
    got.emplace();
    got->status = st;
    got->version = a.version;
    if (a.delta != nullptr) got->delta.assign(a.delta, static_cast<size_t>(a.delta_bytes));
  });
  EXPECT_FALSE(got.has_value()) << "answered before worker 1 pushed";
  const std::vector<float> g1 = Grad(1, 0);
  ASSERT_TRUE(s.Push(1, 0, kKey, g1.data(), kNumel).ok());
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->status.ok()) << got->status;
  EXPECT_EQ(got->version, 1);
  EXPECT_EQ(got->delta.size(), static_cast<size_t>(4 + kNumel));
}

TEST(PullDeltaStoreTest, ResidualIsStateThatSnapshotsAndResumesCarry) {
  ShardStore a;
  ASSERT_TRUE(a.Configure(SyncConfig(1, CompressionType::kInt8, /*momentum=*/0.9)).ok());
  const std::vector<float> init = Init();
  ASSERT_TRUE(a.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  for (int64_t step = 0; step < 10; ++step) Step(a, 1, step);
  std::vector<KeyState> snap;
  ASSERT_TRUE(a.Snapshot({kKey}, &snap).ok());
  ASSERT_EQ(snap[0].optimizer_state.size(), static_cast<size_t>(2 * kNumel)) << "momentum, then the residual";
  // A store resumed from the snapshot goes on exactly as the original.
  ShardStore b;
  ASSERT_TRUE(b.Configure(SyncConfig(1, CompressionType::kInt8, 0.9)).ok());
  ASSERT_TRUE(b.InitKey(kKey, {kNumel}, snap[0].values.data(), kNumel, 10, snap[0].optimizer_state).ok());
  for (int64_t step = 10; step < 20; ++step) {
    Step(a, 1, step);
    Step(b, 1, step);
  }
  EXPECT_EQ(PullDeltaNow(a, 0, 20, -1).weights, PullDeltaNow(b, 0, 20, -1).weights);
  // Momentum's state alone (a checkpoint of a run without --pull-gc-type) is refused.
  ShardStore c;
  ASSERT_TRUE(c.Configure(SyncConfig(1, CompressionType::kInt8, 0.9)).ok());
  const std::vector<float> momentum_only(snap[0].optimizer_state.begin(), snap[0].optimizer_state.begin() + kNumel);
  const absl::Status s = c.InitKey(kKey, {kNumel}, snap[0].values.data(), kNumel, 10, momentum_only);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--pull-gc-type"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("written with float32 pulls; --pull-gc-type none resumes it"));
  // And the other way round: a residual where the store packs no pulls.
  ShardStore d;
  ASSERT_TRUE(d.Configure(SyncConfig(1, CompressionType::kNone, 0.9)).ok());
  const absl::Status t = d.InitKey(kKey, {kNumel}, snap[0].values.data(), kNumel, 10, snap[0].optimizer_state);
  EXPECT_EQ(t.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.message()), HasSubstr("It has a pull residual"));
}

TEST(PullDeltaStoreTest, OnlySyncStoresAndNot2bit) {
  for (MergeMode mode : {MergeMode::kAsync, MergeMode::kSsp}) {
    ShardStore s;
    StoreConfig c = SyncConfig(2, CompressionType::kInt8);
    c.mode = mode;
    c.keep_previous_version = false;
    const absl::Status st = s.Configure(c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << ModeName(mode);
    EXPECT_THAT(std::string(st.message()), HasSubstr("dist_sync only"));
  }
  ShardStore s;
  const absl::Status st = s.Configure(SyncConfig(2, CompressionType::kTwoBit));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("2bit"));
  // A restarted worker 0 must configure it the same way.
  ShardStore t;
  ASSERT_TRUE(t.Configure(SyncConfig(2, CompressionType::kInt8)).ok());
  EXPECT_THAT(std::string(t.Configure(SyncConfig(2, CompressionType::kNone)).message()),
              HasSubstr("pull_compression int8 vs none"));
}

TEST(PullDeltaStoreTest, WithoutAPreviousVersionKeptTheSpareBufferServes) {
  // The in-process path (keep_previous_version off) packs the same bytes.
  ShardStore a, b;
  StoreConfig no_prev = SyncConfig(1, CompressionType::kInt8);
  no_prev.keep_previous_version = false;
  ASSERT_TRUE(a.Configure(no_prev).ok());
  ASSERT_TRUE(b.Configure(SyncConfig(1, CompressionType::kInt8)).ok());
  const std::vector<float> init = Init();
  ASSERT_TRUE(a.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  ASSERT_TRUE(b.InitKey(kKey, {kNumel}, init.data(), kNumel).ok());
  for (int64_t step = 0; step < 5; ++step) {
    Step(a, 1, step);
    Step(b, 1, step);
    const Got x = PullDeltaNow(a, 0, step + 1, step);
    const Got y = PullDeltaNow(b, 0, step + 1, step);
    EXPECT_EQ(x.delta, y.delta);
    EXPECT_EQ(x.weights, y.weights);
  }
}

}  // namespace
}  // namespace dtrain::kv
