// The gradient codecs (common/kv/compression) against closed form: 2-bit values and
// residuals on hand-made vectors, the 1-bit scale, fp16 rounding (subnormals,
// overflow), the exact packed sizes, and error feedback over many steps.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/kv/compression/fp16_codec.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/compression/int8_codec.h"
#include "common/kv/compression/one_bit_codec.h"
#include "common/kv/compression/two_bit_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// `packed` decoded into `numel` floats (a failed Decode fails the test).
std::vector<float> Decoded(const GradientCodec& codec, const std::string& packed, size_t numel) {
  std::vector<float> out(numel, -999.0f);
  const absl::Status s =
      codec.Decode(packed.data(), static_cast<int64_t>(packed.size()), out.data(), static_cast<int64_t>(out.size()));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Encodes `grad` with `residual`, returns the decoded values.
std::vector<float> RoundTrip(const GradientCodec& codec, const std::vector<float>& grad, std::vector<float>& residual,
                             std::string* packed_out = nullptr) {
  std::string packed(static_cast<size_t>(codec.PackedBytes(static_cast<int64_t>(grad.size()))), '\xff');
  codec.Encode(grad.data(), residual.data(), static_cast<int64_t>(grad.size()), packed.data());
  if (packed_out != nullptr) *packed_out = packed;
  return Decoded(codec, packed, grad.size());
}

// As RoundTrip, with a codec's rounded (push) encoding and its random stream `seed`
// (TwoBitCodec, OneBitCodec).
template <typename Codec>
std::vector<float> RoundedTrip(const Codec& codec, const std::vector<float>& grad, std::vector<float>& residual,
                               uint64_t seed) {
  std::string packed(static_cast<size_t>(codec.PackedBytes(static_cast<int64_t>(grad.size()))), '\xff');
  codec.EncodeRounded(grad.data(), residual.data(), static_cast<int64_t>(grad.size()), packed.data(), seed);
  return Decoded(codec, packed, grad.size());
}

TEST(GradientCodecTest, ParsesMxnetNamesAndChecksTheThreshold) {
  EXPECT_EQ(*ParseCompressionType("2bit"), CompressionType::kTwoBit);
  EXPECT_EQ(*ParseCompressionType("1bit"), CompressionType::kOneBit);
  EXPECT_EQ(*ParseCompressionType("fp16"), CompressionType::kFp16);
  EXPECT_EQ(*ParseCompressionType("none"), CompressionType::kNone);
  EXPECT_EQ(*ParseCompressionType("int8"), CompressionType::kInt8);
  EXPECT_THAT(std::string(ParseCompressionType("3bit").status().message()),
              HasSubstr("none, 2bit, 1bit, fp16 or int8"));
  EXPECT_TRUE(ValidateSpec({CompressionType::kTwoBit, 0.5f}).ok());
  EXPECT_FALSE(ValidateSpec({CompressionType::kTwoBit, 0.0f}).ok());
  EXPECT_FALSE(ValidateSpec({CompressionType::kTwoBit, -1.0f}).ok());
  EXPECT_FALSE(ValidateSpec({CompressionType::kTwoBit, std::numeric_limits<float>::infinity()}).ok());
  EXPECT_FALSE(ValidateSpec({CompressionType::kTwoBit, std::nanf("")}).ok());
  EXPECT_FALSE(ValidateSpec({static_cast<CompressionType>(7), 0.5f}).ok());
  EXPECT_EQ(MakeCodec({CompressionType::kNone, 0.5f}), nullptr);
}

TEST(GradientCodecTest, PackedSizesFollowFromTheElementCountAlone) {
  TwoBitCodec two(0.5f);
  OneBitCodec one;
  Fp16Codec half;
  EXPECT_EQ(two.PackedBytes(0), 0);
  EXPECT_EQ(two.PackedBytes(1), 4);
  EXPECT_EQ(two.PackedBytes(16), 4);
  EXPECT_EQ(two.PackedBytes(17), 8);
  EXPECT_EQ(two.PackedBytes(1000000), 250000);  // 16 values per float: 1/16 of the bytes
  EXPECT_EQ(one.PackedBytes(0), 4);
  EXPECT_EQ(one.PackedBytes(32), 8);
  EXPECT_EQ(one.PackedBytes(33), 12);
  EXPECT_EQ(half.PackedBytes(7), 14);
  // Any other length is refused, naming both, and nothing is written.
  std::vector<float> out(17, 3.0f);
  std::string packed(4, '\0');
  const absl::Status s = two.Decode(packed.data(), 4, out.data(), 17);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("4 bytes, want 8 for 17 values"));
  EXPECT_THAT(out, ::testing::Each(3.0f));
  EXPECT_FALSE(one.Decode(packed.data(), 4, out.data(), 1).ok());
  EXPECT_FALSE(half.Decode(packed.data(), 4, out.data(), 1).ok());
}

TEST(TwoBitCodecTest, ValuesAndResidualsOnAHandMadeVector) {
  TwoBitCodec codec(0.5f);
  const std::vector<float> grad = {0.7f, -0.7f, 0.2f, -0.2f, 0.5f, -0.5f, 1.75f, 0.0f, 0.49f};
  std::vector<float> residual(grad.size(), 0.0f);
  std::string packed;
  const std::vector<float> got = RoundTrip(codec, grad, residual, &packed);
  EXPECT_THAT(got, ElementsAre(0.5f, -0.5f, 0.0f, 0.0f, 0.5f, -0.5f, 0.5f, 0.0f, 0.0f));
  // Residual = (grad + 0) - sent; a value far past the threshold keeps the rest.
  EXPECT_THAT(residual, ElementsAre(0.7f - 0.5f, -0.7f + 0.5f, 0.2f, -0.2f, 0.0f, 0.0f, 1.25f, 0.0f, 0.49f));
  // MXNet's bits: per byte, the first value in the two high bits, 11 = +, 10 = -.
  ASSERT_EQ(packed.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(packed[0]), 0xc0 | 0x20);         // +, -, 0, 0
  EXPECT_EQ(static_cast<uint8_t>(packed[1]), 0xc0 | 0x20 | 0x0c);  // +, -, +, 0
  EXPECT_EQ(static_cast<uint8_t>(packed[2]), 0x00);                // 0 (0.49) and padding
  EXPECT_EQ(static_cast<uint8_t>(packed[3]), 0x00);

  // The next step adds the residual: 0.2 + 0.2 = 0.4 stays, 0.49 + 0.01 = 0.5 goes,
  // 1.25 + 0 goes again (one quantum per step).
  const std::vector<float> grad2 = {0.0f, 0.0f, 0.2f, -0.3f, 0.0f, 0.0f, 0.0f, 0.0f, 0.01f};
  const std::vector<float> got2 = RoundTrip(codec, grad2, residual);
  EXPECT_THAT(got2, ElementsAre(0.0f, 0.0f, 0.0f, -0.5f, 0.0f, 0.0f, 0.5f, 0.0f, 0.5f));
  EXPECT_FLOAT_EQ(residual[2], 0.4f);
  EXPECT_FLOAT_EQ(residual[3], 0.0f);
  EXPECT_FLOAT_EQ(residual[6], 0.75f);
  EXPECT_NEAR(residual[8], 0.0f, 1e-7);
}

TEST(TwoBitCodecTest, DecodesEveryBitPatternAndAnotherThreshold) {
  TwoBitCodec codec(0.25f);
  // 00 and 01 are zero (MXNet's dequantize reads only 11 and 10).
  const std::string packed = {static_cast<char>(0xc0 | 0x20 | 0x04 | 0x00), 0, 0, 0};
  std::vector<float> out(4);
  ASSERT_TRUE(codec.Decode(packed.data(), 4, out.data(), 4).ok());
  EXPECT_THAT(out, ElementsAre(0.25f, -0.25f, 0.0f, 0.0f));
}

// The pushes' bound (EncodeOptions::residual_bound): what a value owes beyond the bound's
// quanta is dropped, so when its gradient turns the next push already carries the new
// sign, where the whole residual would go on sending the old one.
TEST(TwoBitCodecTest, ResidualBoundDropsWhatIsOwedBeyondIt) {
  const auto bounded = MakeCodec({CompressionType::kTwoBit, 0.5f}, EncodeOptions{1.0f});
  TwoBitCodec whole(0.5f);
  const std::vector<float> grad = {2.0f, 0.7f, 0.3f, -0.3f, -0.6f, -3.0f};
  std::vector<float> r_bounded(grad.size(), 0.0f), r_whole(grad.size(), 0.0f);
  EXPECT_THAT(RoundTrip(*bounded, grad, r_bounded), ElementsAre(0.5f, 0.5f, 0.0f, 0.0f, -0.5f, -0.5f));
  EXPECT_THAT(RoundTrip(whole, grad, r_whole), ElementsAre(0.5f, 0.5f, 0.0f, 0.0f, -0.5f, -0.5f));
  EXPECT_THAT(r_whole, ElementsAre(1.5f, 0.7f - 0.5f, 0.3f, -0.3f, -0.6f + 0.5f, -2.5f));
  // Within a quantum nothing changes; beyond it, one quantum is kept.
  EXPECT_THAT(r_bounded, ElementsAre(0.5f, 0.7f - 0.5f, 0.3f, -0.3f, -0.6f + 0.5f, -0.5f));
  // The gradient turns: the bounded residual sends the new sign, the whole one the old.
  const std::vector<float> turned = {-1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f};
  EXPECT_THAT(RoundTrip(*bounded, turned, r_bounded), ElementsAre(-0.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f));
  EXPECT_THAT(RoundTrip(whole, turned, r_whole), ElementsAre(0.5f, 0.0f, 0.0f, 0.0f, 0.0f, -0.5f));
}

// The pushes' 2bit: values at or past the threshold go as Encode sends them; a value short
// of it goes as a quantum with probability |v| / threshold, so that it is sent on average.
TEST(TwoBitCodecTest, RoundedEncodingSendsShortValuesInProportion) {
  const TwoBitCodec codec(0.5f, 1.0f);
  constexpr int64_t kN = 20000;
  std::vector<float> grad(kN);
  for (int64_t i = 0; i < kN; ++i) grad[i] = (i % 4 == 0) ? 0.15f : (i % 4 == 1 ? -0.35f : (i % 4 == 2 ? 0.9f : 0.0f));
  std::vector<float> residual(kN, 0.0f);
  std::string packed(static_cast<size_t>(codec.PackedBytes(kN)), '\0');
  codec.EncodeRounded(grad.data(), residual.data(), kN, packed.data(), 7);
  std::vector<float> sent(kN);
  ASSERT_TRUE(codec.Decode(packed.data(), static_cast<int64_t>(packed.size()), sent.data(), kN).ok());
  double sum[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < kN; ++i) {
    // What was not sent stays owed, as ever (within the bound of one quantum).
    EXPECT_FLOAT_EQ(sent[i] + residual[i], grad[i]) << i;
    EXPECT_TRUE(sent[i] == 0.0f || (sent[i] > 0) == (grad[i] > 0)) << "a quantum of the value's own sign";
    sum[i % 4] += sent[i];
  }
  constexpr double kPer = kN / 4;
  EXPECT_NEAR(sum[0] / kPer, 0.15, 0.02) << "0.15 goes as 0.5 about 30% of the time";
  EXPECT_NEAR(sum[1] / kPer, -0.35, 0.02);
  EXPECT_DOUBLE_EQ(sum[2] / kPer, 0.5) << "past the threshold: always one quantum";
  EXPECT_DOUBLE_EQ(sum[3], 0.0) << "zero is never sent";
  // The same seed, the same bytes; another seed, others.
  std::vector<float> r2(kN, 0.0f), r3(kN, 0.0f);
  std::string again(packed.size(), '\0'), other(packed.size(), '\0');
  codec.EncodeRounded(grad.data(), r2.data(), kN, again.data(), 7);
  codec.EncodeRounded(grad.data(), r3.data(), kN, other.data(), 8);
  EXPECT_EQ(again, packed);
  EXPECT_EQ(r2, residual);
  EXPECT_NE(other, packed);
}

TEST(OneBitCodecTest, RoundedEncodingDrawsSignsInProportion) {
  const OneBitCodec codec(1.0f);
  constexpr int64_t kN = 20000;
  // Half the values 0.25, half 1.75: scale 1.0; 1.75 always goes as +1, 0.25 as +1 with
  // probability 0.625 (as -1 otherwise), which sends 0.25 on average.
  std::vector<float> grad(kN);
  for (int64_t i = 0; i < kN; ++i) grad[i] = i % 2 == 0 ? 0.25f : 1.75f;
  std::vector<float> residual(kN, 0.0f);
  std::string packed(static_cast<size_t>(codec.PackedBytes(kN)), '\0');
  codec.EncodeRounded(grad.data(), residual.data(), kN, packed.data(), 3);
  std::vector<float> sent(kN);
  ASSERT_TRUE(codec.Decode(packed.data(), static_cast<int64_t>(packed.size()), sent.data(), kN).ok());
  double small = 0;
  for (int64_t i = 0; i < kN; ++i) {
    if (i % 2 == 1) {
      EXPECT_EQ(sent[i], 1.0f);
      EXPECT_FLOAT_EQ(residual[i], 0.75f);
      continue;
    }
    small += sent[i];
    // As +1: -0.75 owed; as -1: 1.25 owed, bounded to one quantum.
    EXPECT_FLOAT_EQ(residual[i], sent[i] > 0 ? -0.75f : 1.0f) << i;
  }
  EXPECT_NEAR(small / (kN / 2), 0.25, 0.03);
  // All zero: scale 0, sent as +0, nothing owed.
  std::vector<float> zero(8, 0.0f), r(8, 0.0f);
  EXPECT_THAT(RoundTrip(codec, zero, r), ::testing::Each(0.0f));
  std::string z(static_cast<size_t>(codec.PackedBytes(8)), '\0');
  codec.EncodeRounded(zero.data(), r.data(), 8, z.data(), 1);
  EXPECT_EQ(static_cast<uint8_t>(z[4]), 0xff) << "+0 for every value";
  EXPECT_THAT(r, ::testing::Each(0.0f));
}

// 2bit's pushes drop a residual of the other sign than the value's new gradient too; the
// pulls' Encode keeps it.
TEST(TwoBitCodecTest, RoundedEncodingDropsAResidualAgainstTheNewGradient) {
  const TwoBitCodec codec(0.5f, 1.0f);
  // Past the threshold either way, so nothing is drawn: -0.3 dropped before 0.6 (sent
  // 0.5, 0.1 owed), 0.3 added to 0.6 (0.5 sent, 0.4 owed), -0.2 added to -0.4 (-0.5 sent,
  // -0.1 owed), 0.2 beside a zero gradient kept (short of the quantum: drawn).
  const std::vector<float> grad = {0.6f, 0.6f, -0.4f, 0.0f};
  std::vector<float> residual = {-0.3f, 0.3f, -0.2f, 0.2f};
  const std::vector<float> sent = RoundedTrip(codec, grad, residual, 11);
  EXPECT_THAT(std::vector<float>(sent.begin(), sent.begin() + 3), ElementsAre(0.5f, 0.5f, -0.5f));
  EXPECT_NEAR(residual[0], 0.1f, 1e-6f);
  EXPECT_NEAR(residual[1], 0.4f, 1e-6f);
  EXPECT_NEAR(residual[2], -0.1f, 1e-6f);
  EXPECT_TRUE((sent[3] == 0.5f && std::fabs(residual[3] + 0.3f) < 1e-6f) || (sent[3] == 0.0f && residual[3] == 0.2f))
      << sent[3] << " " << residual[3];

  // Encode keeps the opposing residual: 0.6 - 0.3 = 0.3 is short of the quantum, owed.
  std::vector<float> kept = {-0.3f, 0.3f, -0.2f, 0.2f};
  EXPECT_THAT(RoundTrip(codec, grad, kept), ElementsAre(0.0f, 0.5f, -0.5f, 0.0f));
  EXPECT_NEAR(kept[0], 0.3f, 1e-6f);
}

// The pushes drop a residual of the other sign than the value's new gradient (a value
// near zero overshot and would pay it back against its gradient); one of the same sign,
// or beside a zero gradient, is added as before. The pulls' Encode keeps every residual.
TEST(OneBitCodecTest, RoundedEncodingDropsAResidualAgainstTheNewGradient) {
  const OneBitCodec codec(1.0f);
  const std::vector<float> grad = {2.0f, 2.0f, -2.0f, 0.0f};
  std::vector<float> residual = {-0.5f, 0.5f, -0.5f, 0.4f};
  const std::vector<float> sent = RoundedTrip(codec, grad, residual, 5);
  // v = {2.0 (-0.5 dropped), 2.5, -2.5, 0.4}: scale 7.4 / 4 = 1.85.
  EXPECT_FLOAT_EQ(sent[0], 1.85f);
  EXPECT_FLOAT_EQ(sent[1], 1.85f);
  EXPECT_FLOAT_EQ(sent[2], -1.85f);
  EXPECT_NEAR(residual[0], 0.15f, 1e-6f);
  EXPECT_NEAR(residual[1], 0.65f, 1e-6f);
  EXPECT_NEAR(residual[2], -0.65f, 1e-6f);
  // 0.4 is within the scale: drawn, with 0.4 - 1.85 or 0.4 + 1.85 (bounded to 1.85) owed.
  EXPECT_TRUE(std::fabs(residual[3] + 1.45f) < 1e-6f || residual[3] == 1.85f) << residual[3];

  std::vector<float> kept = {-0.5f, 0.5f, -0.5f, 0.4f};
  RoundTrip(codec, grad, kept);
  // v = {1.5, 2.5, -2.5, 0.4}: scale 6.9 / 4 = 1.725; 1.5 owes 1.5 - 1.725.
  EXPECT_NEAR(kept[0], -0.225f, 1e-6f);
}

TEST(OneBitCodecTest, ResidualBoundIsInUnitsOfTheScale) {
  const auto bounded = MakeCodec({CompressionType::kOneBit, 0.0f}, EncodeOptions{1.0f});
  const std::vector<float> grad = {4.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> r_bounded(grad.size(), 0.0f), r_whole(grad.size(), 0.0f);
  // scale = 4 / 4 = 1: every value goes as +1.
  EXPECT_THAT(RoundTrip(*bounded, grad, r_bounded), ElementsAre(1.0f, 1.0f, 1.0f, 1.0f));
  EXPECT_THAT(RoundTrip(OneBitCodec(), grad, r_whole), ElementsAre(1.0f, 1.0f, 1.0f, 1.0f));
  EXPECT_THAT(r_whole, ElementsAre(3.0f, -1.0f, -1.0f, -1.0f));
  EXPECT_THAT(r_bounded, ElementsAre(1.0f, -1.0f, -1.0f, -1.0f));
}

TEST(GradientCodecTest, ResidualBoundLeavesFp16AndInt8Alone) {
  const std::vector<float> grad = {0.1f, -2.0f, 1e-4f, 3.3f};
  for (CompressionType t : {CompressionType::kFp16, CompressionType::kInt8}) {
    std::vector<float> r_bounded(grad.size(), 0.0f), r_whole(grad.size(), 0.0f);
    EXPECT_EQ(RoundTrip(*MakeCodec({t, 0.0f}, EncodeOptions{1.0f}), grad, r_bounded),
              RoundTrip(*MakeCodec({t, 0.0f}), grad, r_whole))
        << CompressionTypeName(t);
    EXPECT_EQ(r_bounded, r_whole) << CompressionTypeName(t);
  }
}

TEST(OneBitCodecTest, SignTimesTheMeanMagnitude) {
  OneBitCodec codec;
  const std::vector<float> grad = {1.0f, -3.0f, 0.0f, 2.0f};
  std::vector<float> residual = {0.0f, 0.0f, 0.0f, 0.0f};
  std::string packed;
  const std::vector<float> got = RoundTrip(codec, grad, residual, &packed);
  // scale = mean |g| = 6 / 4 = 1.5; 0 counts as non-negative.
  EXPECT_THAT(got, ElementsAre(1.5f, -1.5f, 1.5f, 1.5f));
  EXPECT_THAT(residual, ElementsAre(-0.5f, -1.5f, -1.5f, 0.5f));
  ASSERT_EQ(packed.size(), 8u);
  float scale;
  std::memcpy(&scale, packed.data(), 4);
  EXPECT_EQ(scale, 1.5f);
  EXPECT_EQ(static_cast<uint8_t>(packed[4]), 0x80 | 0x20 | 0x10);
  // Next step: the scale is taken over grad + residual.
  const std::vector<float> got2 = RoundTrip(codec, {0.5f, 1.5f, 1.5f, -0.5f}, residual);
  // v = {0, 0, 0, 0}: scale 0, everything sent as +0.
  EXPECT_THAT(got2, ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
  EXPECT_THAT(residual, ElementsAre(0.0f, 0.0f, 0.0f, 0.0f));
}

TEST(Fp16CodecTest, ConversionMatchesIeeeHalf) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the midpoint, ties to even: Inf
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  // Ties to even: 1 + 2^-11 lies between 1 and 1 + 2^-10: goes to 1 (even).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // 1.5 ulp: up to even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Subnormals: units of 2^-24.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);     // a tie: to even, 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);     // above the tie
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 units: tie to even
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up to the smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToHalf(-std::ldexp(5.0f, -24)), 0x8005);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  // Every finite half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaNs
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Fp16CodecTest, ResidualKeepsWhatRoundingAndOverflowLost) {
  Fp16Codec codec;
  const float tiny = std::ldexp(1.0f, -26);  // a quarter of the smallest subnormal: rounds to 0
  const std::vector<float> grad = {1.0f, 1.0f + std::ldexp(1.0f, -12), tiny, 1e5f, -7e4f, 0.1f};
  std::vector<float> residual(grad.size(), 0.0f);
  std::string packed;
  const std::vector<float> got = RoundTrip(codec, grad, residual, &packed);
  EXPECT_THAT(got, ElementsAre(1.0f, 1.0f, 0.0f, kHalfMax, -kHalfMax, HalfToFloat(FloatToHalf(0.1f))));
  EXPECT_THAT(residual, ElementsAre(0.0f, std::ldexp(1.0f, -12), tiny, 1e5f - kHalfMax, -7e4f + kHalfMax,
                                    0.1f - HalfToFloat(FloatToHalf(0.1f))));
  EXPECT_EQ(static_cast<uint8_t>(packed[0]), 0x00);  // little-endian 0x3c00
  EXPECT_EQ(static_cast<uint8_t>(packed[1]), 0x3c);
  // Four steps of the tiny value add up to one subnormal unit, which then goes.
  std::vector<float> r = {0.0f};
  float sent = 0;
  for (int i = 0; i < 4; ++i) sent += RoundTrip(codec, {tiny}, r)[0];
  EXPECT_EQ(sent, std::ldexp(1.0f, -24));
  EXPECT_EQ(r[0], 0.0f);
  // Non-finite values are sent as such (the server refuses them) and leave no residual.
  std::vector<float> r2 = {0.0f};
  EXPECT_TRUE(std::isinf(RoundTrip(codec, {std::numeric_limits<float>::infinity()}, r2)[0]));
  EXPECT_EQ(r2[0], 0.0f);
}

TEST(Int8CodecTest, ScaleIsTheLargestMagnitudeOver127AndValuesRoundToNearest) {
  Int8Codec codec;
  EXPECT_EQ(codec.PackedBytes(0), 4);
  EXPECT_EQ(codec.PackedBytes(5), 9);
  // grad + residual = {1.27, -0.635, 0.004, 0.006, 0}: scale 0.01.
  std::vector<float> residual = {0.0f, 0.0f, 0.0f, 0.001f, 0.0f};
  std::string packed;
  const std::vector<float> out = RoundTrip(codec, {1.27f, -0.635f, 0.004f, 0.005f, 0.0f}, residual, &packed);
  ASSERT_EQ(packed.size(), 9u);
  float scale;
  std::memcpy(&scale, packed.data(), 4);
  EXPECT_FLOAT_EQ(scale, 1.27f / 127.0f);
  EXPECT_EQ(static_cast<int8_t>(packed[4]), 127);
  EXPECT_EQ(static_cast<int8_t>(packed[5]), -64);  // -63.5 rounds to even
  EXPECT_EQ(static_cast<int8_t>(packed[6]), 0);
  EXPECT_EQ(static_cast<int8_t>(packed[7]), 1);
  EXPECT_EQ(static_cast<int8_t>(packed[8]), 0);
  const std::vector<float> in = {1.27f, -0.635f, 0.004f, 0.006f, 0.0f};
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_FLOAT_EQ(out[i], static_cast<float>(static_cast<int8_t>(packed[4 + i])) * scale) << i;
    // The residual is exactly what the decoded value lacks.
    EXPECT_NEAR(residual[i], in[i] - out[i], 1e-7) << i;
    EXPECT_LE(std::fabs(residual[i]), scale / 2 + 1e-7) << i;
  }
  // All zero: scale 0, nothing lost.
  std::vector<float> r0(3, 0.0f);
  EXPECT_THAT(RoundTrip(codec, {0.0f, 0.0f, 0.0f}, r0), ElementsAre(0.0f, 0.0f, 0.0f));
  EXPECT_THAT(r0, ElementsAre(0.0f, 0.0f, 0.0f));
  // A NaN makes the whole message non-finite (the server refuses it), not a silent 0.
  std::vector<float> rn(2, 0.0f);
  const std::vector<float> nan_out = RoundTrip(codec, {1.0f, std::nanf("")}, rn);
  EXPECT_TRUE(std::isnan(nan_out[0]) && std::isnan(nan_out[1]));
  // The same with finite values after the NaN (a fuzzer's input): they must not take
  // the NaN's place as the scale.
  std::vector<float> rn2(3, 0.0f);
  const std::vector<float> nan_first = RoundTrip(codec, {std::nanf(""), 2.0f, 1.0f}, rn2);
  EXPECT_TRUE(std::isnan(nan_first[0]) && std::isnan(nan_first[1]) && std::isnan(nan_first[2]));
  // Wrong lengths are refused.
  std::vector<float> dst(5);
  EXPECT_EQ(codec.Decode(packed.data(), 8, dst.data(), 5).code(), absl::StatusCode::kInvalidArgument);
}

// Values near FLT_MAX (a fuzzer repacked one from the wire): the scale times 127 must not
// overflow, or the largest value would decode as inf and its residual as -inf.
TEST(Int8CodecTest, ValuesNearTheLargestFloatDecodeFinite) {
  Int8Codec codec;
  const float big = std::numeric_limits<float>::max();
  for (const float v : {big, -big, std::nextafter(big, 0.0f), big * 0.9999f}) {
    std::vector<float> residual(3, 0.0f);
    const std::vector<float> out = RoundTrip(codec, {v, v / 2, 0.0f}, residual);
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_TRUE(std::isfinite(out[i])) << v << " [" << i << "] decoded as " << out[i];
      EXPECT_TRUE(std::isfinite(residual[i])) << v << " [" << i << "] residual " << residual[i];
    }
    EXPECT_GT(std::fabs(out[0]), std::fabs(v) * 0.99f) << v;
  }
}

// Error feedback: what is not sent now is sent later. Over many steps the running sum
// of decoded values equals the running sum of the inputs minus the residual, and the
// residual stays within a quantum: the sums track each other within one quantum.
class ErrorFeedbackTest : public ::testing::TestWithParam<CompressionType> {};

TEST_P(ErrorFeedbackTest, RunningSumsTrackWithinOneQuantum) {
  constexpr float kThreshold = 0.5f;
  const std::unique_ptr<GradientCodec> codec = MakeCodec({GetParam(), kThreshold});
  ASSERT_NE(codec, nullptr);
  constexpr int kN = 1000, kSteps = 500;
  std::mt19937 rng(7);
  // Gradients within one quantum (as 2bit's guarantee needs), with a bias per element
  // so that the sums drift far beyond a quantum.
  std::uniform_real_distribution<float> noise(-0.3f, 0.3f);
  std::uniform_real_distribution<float> bias_of(-0.2f, 0.2f);
  std::vector<float> bias(kN);
  for (float& b : bias) b = bias_of(rng);
  std::vector<double> sum_in(kN, 0.0), sum_out(kN, 0.0);
  std::vector<float> residual(kN, 0.0f), grad(kN), out(kN);
  std::string packed(static_cast<size_t>(codec->PackedBytes(kN)), '\0');
  double worst_early = 0, worst = 0;  // over the first and the second half of the steps
  for (int t = 0; t < kSteps; ++t) {
    for (int i = 0; i < kN; ++i) grad[i] = bias[i] + noise(rng);
    codec->Encode(grad.data(), residual.data(), kN, packed.data());
    ASSERT_TRUE(codec->Decode(packed.data(), static_cast<int64_t>(packed.size()), out.data(), kN).ok());
    for (int i = 0; i < kN; ++i) {
      sum_in[i] += grad[i];
      sum_out[i] += out[i];
      // The identity behind error feedback: sent so far = input so far - residual.
      ASSERT_NEAR(sum_out[i] + residual[i], sum_in[i], 1e-3) << "element " << i << " step " << t;
      double& w = t < kSteps / 2 ? worst_early : worst;
      w = std::max(w, std::fabs(sum_out[i] - sum_in[i]));
    }
  }
  switch (GetParam()) {
    case CompressionType::kTwoBit:  // |g| <= T keeps |r| < T: within one quantum, always
      EXPECT_LT(std::max(worst_early, worst), kThreshold);
      break;
    case CompressionType::kFp16:  // half an ulp of the values: far below any quantum
      EXPECT_LT(std::max(worst_early, worst), 1e-3);
      break;
    case CompressionType::kInt8:  // half of max|g + r| / 127, and |g + r| < 1
      EXPECT_LT(std::max(worst_early, worst), 0.5 / 127 + 1e-4);
      break;
    default:
      // 1bit sends one magnitude for all: an element whose drift exceeds the mean
      // carries a residual until the mean catches up. It stays bounded (the second
      // half of the run no worse than the first) at a few times max |g| (0.5).
      EXPECT_LT(worst, 3.0);
      EXPECT_LE(worst, worst_early * 1.25 + 0.05);
  }
  // Without feedback 2bit would have sent nothing for |g| < 0.5: the sums are far from 0.
  double moved = 0;
  for (int i = 0; i < kN; ++i) moved = std::max(moved, std::fabs(sum_out[i]));
  EXPECT_GT(moved, 50.0);
}

INSTANTIATE_TEST_SUITE_P(Codecs, ErrorFeedbackTest,
                         ::testing::Values(CompressionType::kTwoBit, CompressionType::kOneBit, CompressionType::kFp16,
                                           CompressionType::kInt8),
                         [](const auto& info) {
                           switch (info.param) {
                             case CompressionType::kTwoBit: return std::string("TwoBit");
                             case CompressionType::kOneBit: return std::string("OneBit");
                             case CompressionType::kFp16: return std::string("Fp16");
                             default: return std::string("Int8");
                           }
                         });

}  // namespace
}  // namespace dtrain::kv
