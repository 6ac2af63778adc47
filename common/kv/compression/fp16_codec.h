// "fp16": each value of grad + residual as an IEEE 754 half (binary16), rounded to
// nearest, ties to even, subnormals included; the rounding error stays in the
// residual. A finite value beyond the half range (|v| > 65504) is sent as +-65504 and
// the excess stays in the residual rather than becoming Inf; NaN and Inf are sent as
// such (and refused by the server like any non-finite push).
//
// Layout: two bytes per value, little-endian.
#pragma once

#include <cstdint>

#include "common/kv/compression/gradient_codec.h"

namespace dtrain::kv {

// IEEE conversions (round to nearest even; overflow to Inf, NaN kept quiet).
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// The largest finite half.
inline constexpr float kHalfMax = 65504.0f;

class Fp16Codec final : public GradientCodec {
 public:
  CompressionType type() const override { return CompressionType::kFp16; }
  int64_t PackedBytes(int64_t numel) const override { return numel * 2; }
  void Encode(const float* grad, float* residual, int64_t numel, char* out) const override;
  absl::Status Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const override;
};

}  // namespace dtrain::kv
