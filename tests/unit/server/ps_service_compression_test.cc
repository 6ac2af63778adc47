// Compressed pushes through the real service and PsClients: the server
// unpacks them and merges as usual, refuses a length other than the codec's size for
// the key's element count (naming key, expected and received bytes), refuses NaN/Inf
// in what it unpacked, and the request checks refuse what no codec can mean. Packed
// pulls (--pull-gc-type): workers that asked for the change get it, add it, and hold the
// server's weights bit for bit on a fraction of the bytes; the first pull, and any
// worker that did not ask, gets the weights.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/kv/compression/fp16_codec.h"
#include "common/kv/compression/gradient_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/kv/request_checks.h"
#include "tests/unit/server/loopback.h"

namespace dtrain::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using worker::PsClient;

worker::PushData Packed(const std::string& bytes, int64_t numel, kv::CompressionType type, float threshold = 0) {
  worker::PushData d;
  d.bytes = bytes.data();
  d.size = static_cast<int64_t>(bytes.size());
  d.numel = numel;
  d.compression = {type, threshold};
  return d;
}

// Packs `grad` with a fresh residual.
std::string Pack(const kv::CompressionSpec& spec, std::vector<float> grad) {
  auto codec = kv::MakeCodec(spec);
  std::vector<float> residual(grad.size(), 0.0f);
  std::string out(static_cast<size_t>(codec->PackedBytes(static_cast<int64_t>(grad.size()))), '\0');
  codec->Encode(grad.data(), residual.data(), static_cast<int64_t>(grad.size()), out.data());
  return out;
}

TEST(PsServiceCompressionTest, TwoBitPushesAreUnpackedAndMergedForIdenticalWeights) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  auto w1 = ps.Connect(1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2, 3, 4, 5})}, kRpc).ok());
  const kv::CompressionSpec spec{kv::CompressionType::kTwoBit, 0.5f};
  const std::string p0 = Pack(spec, {0.6f, -0.6f, 0.1f, 0.9f, 0.0f});  // +.5 -.5 0 +.5 0
  const std::string p1 = Pack(spec, {0.6f, 0.6f, -0.7f, 0.0f, 0.0f});  // +.5 +.5 -.5 0 0
  ASSERT_EQ(p0.size(), 4u);
  float out0[5] = {}, out1[5] = {};
  const auto t0 = w0->Submit(worker::KeyRequest::PushPull(0, 5, Packed(p0, 5, spec.type, spec.threshold), out0));
  const auto t1 = w1->Submit(worker::KeyRequest::PushPull(0, 5, Packed(p1, 5, spec.type, spec.threshold), out1));
  ASSERT_TRUE(w0->Wait(t0, Soon()).ok());
  ASSERT_TRUE(w1->Wait(t1, Soon()).ok());
  // w - 1.0 * mean of the unpacked pushes.
  EXPECT_THAT(out0, ElementsAre(0.5f, 2.0f, 3.25f, 3.75f, 5.0f));
  EXPECT_THAT(out1, ElementsAre(0.5f, 2.0f, 3.25f, 3.75f, 5.0f));
  // 4 bytes went on the wire for 20 bytes of floats.
  EXPECT_EQ(w0->bytes_pushed(), 4);
  EXPECT_EQ(w0->bytes_pushed_uncompressed(), 20);
}

TEST(PsServiceCompressionTest, OneBitAndFp16PushesMergeTheirUnpackedValues) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(1, {0, 0, 0, 0}), Key(2, {0, 0})}, kRpc).ok());
  const std::string one = Pack({kv::CompressionType::kOneBit, 0}, {1, -3, 0, 2});  // scale 1.5
  const std::string half = Pack({kv::CompressionType::kFp16, 0}, {0.1f, -65504.0f});
  float out1[4] = {}, out2[2] = {};
  const auto a = w->Submit(worker::KeyRequest::PushPull(0, 1, Packed(one, 4, kv::CompressionType::kOneBit), out1));
  const auto b = w->Submit(worker::KeyRequest::PushPull(0, 2, Packed(half, 2, kv::CompressionType::kFp16), out2));
  ASSERT_TRUE(w->Wait(a, Soon()).ok());
  ASSERT_TRUE(w->Wait(b, Soon()).ok());
  EXPECT_THAT(out1, ElementsAre(-1.5f, 1.5f, -1.5f, -1.5f));
  EXPECT_THAT(out2, ElementsAre(-kv::HalfToFloat(kv::FloatToHalf(0.1f)), 65504.0f));
}

TEST(PsServiceCompressionTest, WrongPackedLengthIsRefusedNamingKeyExpectedAndGot) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(7, std::vector<float>(17, 1.0f))}, kRpc).ok());
  // 17 values take 8 bytes in 2bit; 4 (what 16 would take) and 12 are refused.
  for (int64_t bytes : {4, 12, 0}) {
    const std::string packed(static_cast<size_t>(bytes), '\0');
    float out[17];
    const absl::Status s = w->Wait(
        w->Submit(worker::KeyRequest::PushPull(0, 7, Packed(packed, 17, kv::CompressionType::kTwoBit, 0.5f), out)),
        Soon());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("key 7"), HasSubstr(absl::StrCat("has ", bytes, " bytes")),
                                                HasSubstr("expected 8"), HasSubstr("17 elements")))
        << s;
  }
  // The same client's right-sized push still goes through, and the key was not touched.
  const std::string ok = Pack({kv::CompressionType::kTwoBit, 0.5f}, std::vector<float>(17, 0.5f));
  float out[17];
  ASSERT_TRUE(
      w->Wait(w->Submit(worker::KeyRequest::PushPull(0, 7, Packed(ok, 17, kv::CompressionType::kTwoBit, 0.5f), out)),
              Soon())
          .ok());
  EXPECT_EQ(out[16], 0.5f);
  EXPECT_EQ(ps.store_.updates_applied(), 1);
}

TEST(PsServiceCompressionTest, NonFiniteUnpackedValuesAreRefused) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(3, {0, 0})}, kRpc).ok());
  // fp16 Inf, and a 1bit message whose scale is NaN.
  const std::string inf = {0x00, 0x3c, 0x00, static_cast<char>(0x7c)};
  std::string nan_scale(8, '\0');
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan_scale.data(), &nan, 4);
  float out[2];
  absl::Status s =
      w->Wait(w->Submit(worker::KeyRequest::PushPull(0, 3, Packed(inf, 2, kv::CompressionType::kFp16), out)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("element 1 is +Inf"));
  s = w->Wait(w->Submit(worker::KeyRequest::PushPull(0, 3, Packed(nan_scale, 2, kv::CompressionType::kOneBit), out)),
              Soon());
  EXPECT_THAT(std::string(s.message()), HasSubstr("is NaN"));
  EXPECT_EQ(ps.store_.updates_applied(), 0);
}

TEST(RequestChecksCompressionTest, RefusesWhatNoCodecMeans) {
  v1::PushPullRequest push;
  push.set_op(v1::OP_PUSH);
  push.set_key(3);
  push.set_dtype(v1::DTYPE_FLOAT32);
  push.set_compression(v1::COMPRESSION_2BIT);
  push.set_gc_threshold(0.5f);
  EXPECT_TRUE(kv::ValidatePushPullRequest(push, 6).ok()) << "packed sizes are the store's to check";
  auto message = [](const v1::PushPullRequest& r) { return std::string(kv::ValidatePushPullRequest(r, 8).message()); };
  v1::PushPullRequest r = push;
  r.set_gc_threshold(0);
  EXPECT_THAT(message(r), HasSubstr("2bit gc_threshold 0 must be finite and > 0"));
  r.set_gc_threshold(std::numeric_limits<float>::infinity());
  EXPECT_THAT(message(r), HasSubstr("must be finite"));
  r = push;
  r.set_compression(v1::COMPRESSION_FP16);
  EXPECT_THAT(message(r), HasSubstr("without 2bit compression"));
  r.set_gc_threshold(0);
  EXPECT_TRUE(kv::ValidatePushPullRequest(r, 6).ok());
  r.set_compression(static_cast<v1::Compression>(9));
  EXPECT_THAT(message(r), HasSubstr("unknown compression 9"));
  v1::PushPullRequest pull;
  pull.set_op(v1::OP_PULL);
  pull.set_compression(v1::COMPRESSION_FP16);
  EXPECT_THAT(std::string(kv::ValidatePushPullRequest(pull, -1).message()), HasSubstr("pulls are not compressed"));
  // An uncompressed push keeps its whole-float rule.
  r = push;
  r.clear_compression();
  r.clear_gc_threshold();
  EXPECT_THAT(message(r), ::testing::IsEmpty());
  EXPECT_FALSE(kv::ValidatePushPullRequest(r, 6).ok());
}

TEST(PsServiceCompressionTest, PackedPullsKeepWorkersOnTheServersWeightsBitForBit) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  auto w1 = ps.Connect(1);
  ASSERT_TRUE(w0 && w1);
  w0->SetPullCompression(kv::CompressionType::kInt8);
  w1->SetPullCompression(kv::CompressionType::kInt8);
  constexpr int64_t kN = 300;
  std::vector<float> init(kN);
  for (int64_t i = 0; i < kN; ++i) init[i] = std::sin(0.1f * static_cast<float>(i));
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(0.1), kRpc, 0, kv::CompressionType::kInt8).ok());
  ASSERT_TRUE(w0->InitKeys({Key(7, init)}, kRpc).ok());
  std::vector<float> held0(kN), held1(kN);
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Pull(7, 0, held0.data(), kN)), Soon()).ok());
  ASSERT_TRUE(w1->Wait(w1->Submit(worker::KeyRequest::Pull(7, 0, held1.data(), kN)), Soon()).ok());
  const int64_t first_pull = w0->bytes_pulled();
  EXPECT_EQ(first_pull, kN * 4) << "the first pull is of the weights";
  for (int64_t step = 0; step < 10; ++step) {
    std::vector<float> g0(kN), g1(kN);
    for (int64_t i = 0; i < kN; ++i) {
      g0[i] = std::cos(0.05f * static_cast<float>(i * (step + 1)));
      g1[i] = 0.3f * std::sin(0.02f * static_cast<float>(i + step));
    }
    const auto t0 =
        w0->Submit(worker::KeyRequest::PushPull(step, 7, worker::PushData::Floats(g0.data(), kN), held0.data(), true));
    const auto t1 =
        w1->Submit(worker::KeyRequest::PushPull(step, 7, worker::PushData::Floats(g1.data(), kN), held1.data(), true));
    ASSERT_TRUE(w0->Wait(t0, Soon()).ok());
    ASSERT_TRUE(w1->Wait(t1, Soon()).ok());
  }
  absl::StatusOr<std::vector<kv::KeyState>> state = w0->GetState({7}, kRpc);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ((*state)[0].version, 10);
  EXPECT_EQ(0, std::memcmp(held0.data(), (*state)[0].values.data(), kN * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(held1.data(), (*state)[0].values.data(), kN * sizeof(float)));
  EXPECT_EQ((*state)[0].optimizer_state.size(), static_cast<size_t>(kN)) << "sgd: the pull residual only";
  // Ten packed changes of 4 + 300 bytes each.
  EXPECT_EQ(w0->bytes_pulled() - first_pull, 10 * (4 + kN));
  EXPECT_EQ(w0->bytes_pulled_uncompressed() - first_pull, 10 * kN * 4);
  // A push-pull that does not ask gets the weights (what it holds is not vouched for).
  std::vector<float> zero(kN, 0.0f), fresh(kN, -1.0f);
  const int64_t before = w0->bytes_pulled();
  const auto a =
      w0->Submit(worker::KeyRequest::PushPull(10, 7, worker::PushData::Floats(zero.data(), kN), fresh.data(), false));
  const auto b =
      w1->Submit(worker::KeyRequest::PushPull(10, 7, worker::PushData::Floats(zero.data(), kN), held1.data(), true));
  ASSERT_TRUE(w0->Wait(a, Soon()).ok());
  ASSERT_TRUE(w1->Wait(b, Soon()).ok());
  EXPECT_EQ(w0->bytes_pulled() - before, kN * 4);
  EXPECT_EQ(fresh, held1);
}

TEST(PsServiceCompressionTest, PullCompressionIsRefusedOutsideDistSyncAndPullDeltaOutsidePushPull) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  const absl::Status s = w->Configure(KVStoreMode::kDistAsync, 1, Sgd(0.1), kRpc, 0, kv::CompressionType::kInt8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dist_sync only"));
  v1::PushPullRequest pull;
  pull.set_op(v1::OP_PULL);
  pull.set_key(1);
  pull.set_pull_delta(true);
  EXPECT_THAT(std::string(kv::ValidatePushPullRequest(pull, 0, kv::RequestLimits{}).message()),
              HasSubstr("pull_delta is for push-pulls"));
}

}  // namespace
}  // namespace dtrain::server
