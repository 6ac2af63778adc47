// PushCompressor, without sockets: the threshold it sends, the packed bytes, and the
// error feedback (what a push leaves out comes back in the next one).
#include "services/worker/kv/push_compressor.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/kv/placement.h"
#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

kv::Placement TwoSlices() { return kv::ComputePlacement({6, 35}, 1); }

std::vector<float> Decode(const kv::CompressionSpec& spec, const PushData& data) {
  std::vector<float> out(static_cast<size_t>(data.numel));
  auto codec = kv::MakeCodec(spec);
  EXPECT_TRUE(codec->Decode(data.bytes, data.size, out.data(), data.numel).ok());
  return out;
}

TEST(PushCompressorTest, NoneIsDisabled) {
  PushCompressor none;
  EXPECT_FALSE(none.enabled());
  PushCompressor explicit_none({kv::CompressionType::kNone, 0.5f}, 2.0);
  EXPECT_FALSE(explicit_none.enabled());
}

TEST(PushCompressorTest, TwoBitThresholdIsSentInPushedUnits) {
  // Gradients pushed as means over 4 workers: MXNet's threshold 0.5 on sums is 0.125.
  PushCompressor c({kv::CompressionType::kTwoBit, 0.5f}, 4.0);
  ASSERT_TRUE(c.enabled());
  EXPECT_EQ(c.wire_spec().type, kv::CompressionType::kTwoBit);
  EXPECT_FLOAT_EQ(c.wire_spec().threshold, 0.125f);
  // Other codecs carry the spec as given.
  PushCompressor int8({kv::CompressionType::kInt8, 0.0f}, 4.0);
  EXPECT_EQ(int8.wire_spec().type, kv::CompressionType::kInt8);
}

TEST(PushCompressorTest, PackedBytesAndErrorFeedback) {
  const kv::Placement placement = TwoSlices();
  ASSERT_EQ(placement.slices.size(), 2u);
  PushCompressor c({kv::CompressionType::kTwoBit, 0.5f}, 1.0);
  c.Reset(placement);
  const int64_t n = placement.slices[1].length;
  std::vector<float> grad(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) grad[j] = 0.1f * static_cast<float>(j % 9) - 0.4f;
  const PushData first = c.Pack(1, grad.data(), n);
  EXPECT_EQ(first.numel, n);
  EXPECT_EQ(first.size, kv::MakeCodec(c.wire_spec())->PackedBytes(n));
  EXPECT_EQ(first.compression.type, kv::CompressionType::kTwoBit);
  // What was sent plus what is owed is the gradient, value for value.
  const std::vector<float> sent = Decode(c.wire_spec(), first);
  bool some_left_out = false;
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_NEAR(sent[j] + c.residual(1)[j], grad[j], 1e-6f) << j;
    some_left_out |= c.residual(1)[j] != 0.0f;
  }
  EXPECT_TRUE(some_left_out) << "values below the threshold stay in the residual";
  // The next push carries the residual: zero gradient now, and values that added up
  // past the threshold go out.
  std::vector<float> zero(static_cast<size_t>(n), 0.0f);
  const std::vector<float> owed = c.residual(1);
  const std::vector<float> second = Decode(c.wire_spec(), c.Pack(1, zero.data(), n));
  for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(second[j] + c.residual(1)[j], owed[j], 1e-6f) << j;
  // The other slice was not touched.
  for (float r : c.residual(0)) EXPECT_EQ(r, 0.0f);
}

TEST(PushCompressorTest, TwoBitAndOneBitKeepAtMostOneQuantumOwed) {
  const kv::Placement placement = TwoSlices();
  const int64_t n = placement.slices[0].length;
  const std::vector<float> grad = {3.0f, -0.2f, 0.1f, 0.0f, -5.0f, 0.3f};
  ASSERT_EQ(static_cast<int64_t>(grad.size()), n);
  // 2bit: the quantum is the wire threshold (0.5 / 2 = 0.25).
  PushCompressor two({kv::CompressionType::kTwoBit, 0.5f}, 2.0);
  two.Reset(placement);
  two.Pack(0, grad.data(), n);
  EXPECT_FLOAT_EQ(two.residual(0)[0], 0.25f) << "2.75 owed, one quantum kept";
  EXPECT_FLOAT_EQ(two.residual(0)[4], -0.25f);
  // Below a quantum: sent at random (-0.25 four times in five) or all of it kept.
  EXPECT_TRUE(two.residual(0)[1] == -0.2f || std::fabs(two.residual(0)[1] - 0.05f) < 1e-6f) << two.residual(0)[1];
  // 1bit: the quantum is the message's scale, mean |grad| = 8.6 / 6.
  PushCompressor one({kv::CompressionType::kOneBit, 0.0f}, 2.0);
  one.Reset(placement);
  one.Pack(0, grad.data(), n);
  const float scale = 8.6f / 6.0f;
  EXPECT_NEAR(one.residual(0)[0], scale, 1e-5f);
  EXPECT_NEAR(one.residual(0)[4], -scale, 1e-5f);
  // Within a scale of zero the sign is drawn: -0.2 went as -scale (-0.2 + scale owed) or as
  // +scale (-0.2 - scale owed, bounded to -scale).
  const float r1 = one.residual(0)[1];
  EXPECT_TRUE(std::fabs(r1 - (-0.2f + scale)) < 1e-5f || std::fabs(r1 + scale) < 1e-5f) << r1;
}

// 2bit's rounding is seeded by the slice and its push count: two compressors fed the
// same gradients (two runs of one job) pack the same bytes, and a Reset starts over.
TEST(PushCompressorTest, TwoBitRoundingRepeatsAcrossRunsAndResets) {
  const kv::Placement placement = TwoSlices();
  const int64_t n = placement.slices[1].length;
  std::vector<float> grad(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) grad[j] = 0.01f * static_cast<float>(j) - 0.17f;
  auto three_pushes = [&](PushCompressor& c) {
    std::vector<std::string> out;
    for (int k = 0; k < 3; ++k) {
      const PushData d = c.Pack(1, grad.data(), n);
      out.emplace_back(d.bytes, static_cast<size_t>(d.size));
    }
    return out;
  };
  PushCompressor a({kv::CompressionType::kTwoBit, 0.5f}, 1.0), b({kv::CompressionType::kTwoBit, 0.5f}, 1.0);
  a.Reset(placement);
  b.Reset(placement);
  b.Pack(0, grad.data(), placement.slices[0].length);  // another slice's pushes do not shift slice 1's
  const std::vector<std::string> first = three_pushes(a);
  EXPECT_EQ(three_pushes(b), first);
  EXPECT_NE(first[0], first[1]) << "each push draws anew";
  a.Reset(placement);
  EXPECT_EQ(three_pushes(a), first);
}

TEST(PushCompressorTest, ResetForgetsWhatWasOwed) {
  const kv::Placement placement = TwoSlices();
  PushCompressor c({kv::CompressionType::kOneBit, 0.0f}, 1.0);
  c.Reset(placement);
  const int64_t n = placement.slices[0].length;
  std::vector<float> grad = {0.3f, -0.1f, 0.7f, 0.0f, -0.9f, 0.2f};
  ASSERT_EQ(static_cast<int64_t>(grad.size()), n);
  c.Pack(0, grad.data(), n);
  bool owed = false;
  for (float r : c.residual(0)) owed |= r != 0.0f;
  ASSERT_TRUE(owed);
  c.Reset(placement);
  for (size_t i = 0; i < placement.slices.size(); ++i) {
    ASSERT_EQ(c.residual(i).size(), static_cast<size_t>(placement.slices[i].length));
    for (float r : c.residual(i)) EXPECT_EQ(r, 0.0f);
  }
}

}  // namespace
}  // namespace dtrain::worker
