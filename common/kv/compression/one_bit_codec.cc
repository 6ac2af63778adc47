#include "common/kv/compression/one_bit_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace dtrain::kv {

// Both encodings: residual := grad + residual (with `drop_opposed`, a residual of the
// other sign than its gradient is dropped first), then the scale over it (in double: the
// sum of millions of floats would lose the small ones), written at the head of the
// zeroed `out`. Returns the scale.
float OneBitCodec::Accumulate(const float* grad, float* residual, int64_t numel, char* out, bool drop_opposed) const {
  std::memset(out, 0, static_cast<size_t>(PackedBytes(numel)));
  double sum = 0;
  for (int64_t i = 0; i < numel; ++i) {
    residual[i] = (drop_opposed ? CarriedResidual(residual[i], grad[i]) : residual[i]) + grad[i];
    sum += std::fabs(static_cast<double>(residual[i]));
  }
  const float scale = numel > 0 ? static_cast<float>(sum / static_cast<double>(numel)) : 0.0f;
  std::memcpy(out, &scale, sizeof(scale));
  return scale;
}

float OneBitCodec::ResidualLimit(float scale) const {
  return residual_bound_ > 0 ? residual_bound_ * scale : std::numeric_limits<float>::infinity();
}

void OneBitCodec::Encode(const float* grad, float* residual, int64_t numel, char* out) const {
  const float scale = Accumulate(grad, residual, numel, out, /*drop_opposed=*/false);
  auto* bits = reinterpret_cast<uint8_t*>(out) + sizeof(scale);
  const float limit = ResidualLimit(scale);
  for (int64_t i = 0; i < numel; ++i) {
    float r = residual[i];
    if (r >= 0) {
      bits[i >> 3] |= static_cast<uint8_t>(0x80u >> (i & 7));
      r -= scale;
    } else {
      r += scale;
    }
    residual[i] = std::clamp(r, -limit, limit);
  }
}

void OneBitCodec::EncodeRounded(const float* grad, float* residual, int64_t numel, char* out, uint64_t seed) const {
  const float scale = Accumulate(grad, residual, numel, out, /*drop_opposed=*/true);
  auto* bits = reinterpret_cast<uint8_t*>(out) + sizeof(scale);
  const float limit = ResidualLimit(scale);
  for (int64_t i = 0; i < numel; ++i) {
    const float v = residual[i];
    // v >= s always +, v <= -s always -, in between + with probability (1 + v / s) / 2;
    // scale 0 (all zero) sends +0.
    const bool pos = v >= scale || (v > -scale && UniformAt(seed, i) * 2.0f * scale < scale + v);
    if (pos) bits[i >> 3] |= static_cast<uint8_t>(0x80u >> (i & 7));
    residual[i] = std::clamp(pos ? v - scale : v + scale, -limit, limit);
  }
}

absl::Status OneBitCodec::Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const {
  if (absl::Status s = CheckPackedBytes(*this, packed_bytes, numel); !s.ok()) return s;
  float scale;
  std::memcpy(&scale, packed, sizeof(scale));
  const auto* bits = reinterpret_cast<const uint8_t*>(packed) + sizeof(scale);
  for (int64_t i = 0; i < numel; ++i) {
    out[i] = (bits[i >> 3] & (0x80u >> (i & 7))) != 0 ? scale : -scale;
  }
  return absl::OkStatus();
}

}  // namespace dtrain::kv
