// "int8": grad + residual scaled into signed bytes. One float32 scale per message
// (the largest magnitude over 127), then one byte per value, q = round(v / scale)
// in [-127, 127]; decoded as q * scale. The rounding error, at most scale / 2 per
// value, stays in the residual. About 4x smaller than float32s and, unlike 2bit's
// fixed quantum, it follows the values' own range, which suits what the pull sends:
// weight deltas, whose size falls with the learning rate (docs/architecture.md,
// "Gradient compression").
//
// Layout: the scale as a little-endian float32, then numel int8s.
// Non-finite input gives a non-finite scale, which decodes to non-finite values (and
// is refused by the server as any non-finite push is).
#pragma once

#include <cstdint>

#include "common/kv/compression/gradient_codec.h"

namespace dtrain::kv {

class Int8Codec final : public GradientCodec {
 public:
  CompressionType type() const override { return CompressionType::kInt8; }
  int64_t PackedBytes(int64_t numel) const override { return 4 + numel; }
  void Encode(const float* grad, float* residual, int64_t numel, char* out) const override;
  absl::Status Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const override;
};

}  // namespace dtrain::kv
