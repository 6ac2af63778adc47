#include "common/kv/compression/int8_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace dtrain::kv {

void Int8Codec::Encode(const float* grad, float* residual, int64_t numel, char* out) const {
  float max_abs = 0.0f;
  for (int64_t i = 0; i < numel; ++i) {
    const float v = grad[i] + residual[i];
    // A NaN wins, so the scale (and the decode) says so; a value after it must not
    // take its place (the NaN would then be cast to int8, which is undefined).
    if (std::isnan(v)) {
      max_abs = v;
      break;
    }
    if (std::fabs(v) > max_abs) max_abs = std::fabs(v);
  }
  float scale = max_abs / 127.0f;
  // Near FLT_MAX the rounded scale times 127 can overflow: the largest value would come
  // back as inf (and its residual as -inf). A scale an ulp or two smaller decodes finite;
  // the largest value then packs as 127 (clamped) and the residual keeps the rest.
  while (std::isfinite(scale) && !std::isfinite(127.0f * scale)) scale = std::nextafter(scale, 0.0f);
  std::memcpy(out, &scale, sizeof(scale));
  auto* q = reinterpret_cast<int8_t*>(out + sizeof(scale));
  if (!(scale >= std::numeric_limits<float>::min()) || !std::isfinite(scale)) {
    // All zero, too small for a scale whose reciprocal is finite, or nothing finite to
    // scale by: send zeros (with the scale that says which) and keep everything in the
    // residual.
    for (int64_t i = 0; i < numel; ++i) {
      q[i] = 0;
      residual[i] += grad[i];
    }
    return;
  }
  const float inv = 1.0f / scale;
  for (int64_t i = 0; i < numel; ++i) {
    const float v = grad[i] + residual[i];
    float r = std::nearbyint(v * inv);
    r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
    q[i] = static_cast<int8_t>(r);
    residual[i] = v - r * scale;  // exactly what Decode gives back for this value
  }
}

absl::Status Int8Codec::Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const {
  if (absl::Status s = CheckPackedBytes(*this, packed_bytes, numel); !s.ok()) return s;
  float scale;
  std::memcpy(&scale, packed, sizeof(scale));
  const auto* q = reinterpret_cast<const int8_t*>(packed + sizeof(scale));
  if (!std::isfinite(scale)) {
    for (int64_t i = 0; i < numel; ++i) out[i] = scale;
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < numel; ++i) out[i] = static_cast<float>(q[i]) * scale;
  return absl::OkStatus();
}

}  // namespace dtrain::kv
