#include "common/kv/compression/fp16_codec.h"

#include <cmath>
#include <cstring>

namespace dtrain::kv {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

uint16_t FloatToHalf(float f) {
  const uint32_t x = Bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // Inf, or NaN (kept a NaN: quiet bit set)
    return sign | (a == 0x7f800000u ? 0x7c00 : 0x7e00);
  }
  if (a >= 0x47800000u) return sign | 0x7c00;  // >= 2^16: Inf (65520 and up round there too, below)
  if (a < 0x38800000u) {
    // Below 2^-14, the smallest normal half: a subnormal half counts units of 2^-24.
    // The value is m * 2^(e-150) with m the 24-bit significand; in units of 2^-24,
    // m >> (126 - e), rounded to nearest even.
    const uint32_t e = a >> 23;
    if (e < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal: right
    return sign | static_cast<uint16_t>(q);
  }
  // Normal: rebias the exponent, keep 10 significand bits, round to nearest even on
  // the 13 dropped (a carry moves into the exponent, up to Inf: right).
  const uint32_t odd = (a >> 13) & 1u;
  const uint32_t r = a - (uint32_t{112} << 23) + 0xfffu + odd;
  return sign | static_cast<uint16_t>(r >> 13);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return FromBits(sign | 0x7f800000u | (m << 13));  // Inf, NaN
  if (e == 0) {
    // Zero or subnormal: m * 2^-24, exact in a float.
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign != 0 ? -v : v;
  }
  return FromBits(sign | ((e + 112) << 23) | (m << 13));
}

void Fp16Codec::Encode(const float* grad, float* residual, int64_t numel, char* out) const {
  auto* bytes = reinterpret_cast<uint8_t*>(out);
  for (int64_t i = 0; i < numel; ++i) {
    const float v = residual[i] + grad[i];
    // Beyond the half range: the largest half, the excess kept (not Inf).
    const float sent = std::isfinite(v) ? std::fmax(-kHalfMax, std::fmin(kHalfMax, v)) : v;
    const uint16_t h = FloatToHalf(sent);
    bytes[2 * i] = static_cast<uint8_t>(h & 0xff);
    bytes[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    residual[i] = std::isfinite(v) ? v - HalfToFloat(h) : 0.0f;
  }
}

absl::Status Fp16Codec::Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const {
  if (absl::Status s = CheckPackedBytes(*this, packed_bytes, numel); !s.ok()) return s;
  const auto* bytes = reinterpret_cast<const uint8_t*>(packed);
  for (int64_t i = 0; i < numel; ++i) {
    out[i] = HalfToFloat(static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8)));
  }
  return absl::OkStatus();
}

}  // namespace dtrain::kv
