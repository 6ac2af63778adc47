#include "common/kv/compression/two_bit_codec.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace dtrain::kv {
namespace {

// Value i of a byte (i = index & 3): its two bits as MXNet's quantize_2bit sets them.
constexpr uint8_t kPosBits[4] = {0xc0, 0x30, 0x0c, 0x03};
constexpr uint8_t kNegBits[4] = {0x80, 0x20, 0x08, 0x02};

}  // namespace

float TwoBitCodec::ResidualLimit(float threshold, float bound) {
  return bound > 0 ? bound * threshold : std::numeric_limits<float>::infinity();
}

void TwoBitCodec::Encode(const float* grad, float* residual, int64_t numel, char* out) const {
  auto* bytes = reinterpret_cast<uint8_t*>(out);
  std::memset(bytes, 0, static_cast<size_t>(PackedBytes(numel)));
  const float pos = threshold_, neg = -threshold_, limit = residual_limit_;
  for (int64_t i = 0; i < numel; ++i) {
    const float v = residual[i] + grad[i];
    uint8_t& b = bytes[i >> 2];
    float r = v;
    if (v >= pos) {
      b |= kPosBits[i & 3];
      r = v - pos;
    } else if (v <= neg) {
      b |= kNegBits[i & 3];
      r = v - neg;
    }
    residual[i] = std::clamp(r, -limit, limit);
  }
}

void TwoBitCodec::EncodeRounded(const float* grad, float* residual, int64_t numel, char* out, uint64_t seed) const {
  auto* bytes = reinterpret_cast<uint8_t*>(out);
  std::memset(bytes, 0, static_cast<size_t>(PackedBytes(numel)));
  const float q = threshold_, limit = residual_limit_;
  for (int64_t i = 0; i < numel; ++i) {
    const float v = CarriedResidual(residual[i], grad[i]) + grad[i];
    const float u = UniformAt(seed, i);
    uint8_t& b = bytes[i >> 2];
    float r = v;
    if (v >= q || (v > 0 && u * q < v)) {
      b |= kPosBits[i & 3];
      r = v - q;
    } else if (v <= -q || (v < 0 && u * q < -v)) {
      b |= kNegBits[i & 3];
      r = v + q;
    }
    residual[i] = std::clamp(r, -limit, limit);
  }
}

absl::Status TwoBitCodec::Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const {
  if (absl::Status s = CheckPackedBytes(*this, packed_bytes, numel); !s.ok()) return s;
  const auto* bytes = reinterpret_cast<const uint8_t*>(packed);
  for (int64_t i = 0; i < numel; ++i) {
    const uint8_t bits = bytes[i >> 2] & kPosBits[i & 3];
    out[i] = bits == kPosBits[i & 3] ? threshold_ : (bits == kNegBits[i & 3] ? -threshold_ : 0.0f);
  }
  return absl::OkStatus();
}

}  // namespace dtrain::kv
