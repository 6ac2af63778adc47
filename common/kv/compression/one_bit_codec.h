// "1bit": the sign of each value of grad + residual times one scale per message, the
// mean of |grad + residual| (so the message carries as much magnitude as it stands
// for); the difference stays in the residual (error feedback, as in 1-bit SGD and
// EF-signSGD).
//
// Layout: the scale (float32, little-endian), then one bit per value, eight per byte,
// the first value in a byte's high bit; 1 = +scale, 0 = -scale. The bits are padded
// with zeros to a whole 32-bit word.
//
// With a residual bound B > 0 (EncodeOptions, the pushes), every residual is clipped to
// +-B * scale after the packing: what a value owes beyond B quanta is dropped.
#pragma once

#include "common/kv/compression/gradient_codec.h"

namespace dtrain::kv {

class OneBitCodec final : public GradientCodec {
 public:
  // `residual_bound`: in quanta (the message's scale), >= 0; 0 keeps the whole residual.
  explicit OneBitCodec(float residual_bound = 0) : residual_bound_(residual_bound) {}

  CompressionType type() const override { return CompressionType::kOneBit; }
  // 4 bytes of scale, then 4 bytes per 32 values (rounded up).
  int64_t PackedBytes(int64_t numel) const override { return 4 + (numel + 31) / 32 * 4; }
  void Encode(const float* grad, float* residual, int64_t numel, char* out) const override;
  absl::Status Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const override;

  // The pushes' encoding: a residual of the other sign than the value's new gradient is
  // dropped first (CarriedResidual: 1bit has no zero, so a value near zero always
  // overshoots). Then as Encode for a value v at least the scale s from zero, but one
  // within it goes as +s with probability (1 + v / s) / 2, else as -s, so that v is sent
  // on average, and the residual keeps v - sent. Random numbers from `seed` and the
  // value's index alone (UniformAt).
  void EncodeRounded(const float* grad, float* residual, int64_t numel, char* out, uint64_t seed) const;

 private:
  float Accumulate(const float* grad, float* residual, int64_t numel, char* out, bool drop_opposed) const;
  // How far the residual may go from zero: residual_bound_ quanta of `scale`, or no limit.
  float ResidualLimit(float scale) const;

  const float residual_bound_;
};

}  // namespace dtrain::kv
