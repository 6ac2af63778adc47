// Gradient compression on the push, with MXNet's names and semantics
// (kvstore.set_gradient_compression({'type': '2bit', 'threshold': 0.5})): the worker
// packs each key's gradient before it goes on the wire and keeps, per key, the part
// that packing lost (the residual), adding it to the next gradient (error feedback).
// The server unpacks every push to floats and merges exactly as for an uncompressed
// one, so in dist_sync every worker still pulls bit-identical weights.
//
// Nothing from the wire is trusted for a size: PackedBytes computes the exact packed
// size from the element count, which the server takes from the key it holds, and
// Decode refuses any other length.
//
// The same codecs pack what the pull sends back (--pull-gc-type: each step's weight
// delta, with the residual kept on the server as optimizer state; shard_store.h,
// docs/architecture.md "Gradient compression").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtrain::kv {

// The codecs, numbered as parameter_server.proto's Compression enum.
enum class CompressionType : int {
  kNone = 0,
  kTwoBit = 1,  // "2bit": +-threshold or 0, 16 values per 32-bit word
  kOneBit = 2,  // "1bit": sign times a per-message scale, 32 values per word
  kFp16 = 3,    // "fp16": IEEE half, round to nearest even
  kInt8 = 4,    // "int8": one byte per value times a per-message scale
};

// MXNet's default --gc-threshold.
inline constexpr float kDefaultTwoBitThreshold = 0.5f;

struct CompressionSpec {
  CompressionType type = CompressionType::kNone;
  // 2bit only: the quantum; finite and > 0. The others ignore it (and send 0).
  float threshold = kDefaultTwoBitThreshold;
};

// "none", "2bit", "1bit", "fp16", "int8" (--gc-type); INVALID_ARGUMENT naming the choices.
absl::StatusOr<CompressionType> ParseCompressionType(absl::string_view name);
// The --gc-type name of `type` ("none" for anything unknown).
const char* CompressionTypeName(CompressionType type);
// INVALID_ARGUMENT when the spec cannot be used: an unknown type, or a 2bit threshold
// that is not finite and > 0.
absl::Status ValidateSpec(const CompressionSpec& spec);

// One codec. Implementations are stateless (the residual belongs to the caller, one per
// key) and may be shared between threads.
class GradientCodec {
 public:
  virtual ~GradientCodec() = default;

  virtual CompressionType type() const = 0;

  // The exact size of the packed form of `numel` values (numel >= 0).
  virtual int64_t PackedBytes(int64_t numel) const = 0;

  // Packs grad + residual (numel floats each) into `out` (PackedBytes(numel) bytes)
  // and sets residual := (grad + residual) - Decode(out): what was not sent is sent
  // with a later gradient. `grad` and `residual` may not alias `out`.
  virtual void Encode(const float* grad, float* residual, int64_t numel, char* out) const = 0;

  // Unpacks `packed` (packed_bytes bytes) into `out` (numel floats). INVALID_ARGUMENT
  // "N bytes, want M for K values" when packed_bytes != PackedBytes(numel); nothing
  // is written then. Any bytes of the right length decode (to finite values or not:
  // the caller checks finiteness, as for an uncompressed push).
  virtual absl::Status Decode(const char* packed, int64_t packed_bytes, float* out, int64_t numel) const = 0;
};

// How much a codec keeps of what it could not send. The pull's residual is the servers'
// optimizer state and must add up exactly, so pulls keep all of it (the default); pushes
// bound it (PushCompressor).
struct EncodeOptions {
  // 2bit and 1bit: after each Encode every value's residual is clipped to
  // +-residual_bound quanta (2bit: the threshold; 1bit: the message's scale); 0 keeps it
  // all, as MXNet does. Both codecs send at most one quantum per value and step, so a
  // value whose gradient stays above a quantum piles up a residual that keeps sending
  // the old sign for as many steps after the gradient turns: on the wide mlp (2 workers,
  // 3 x 6400 examples) 2bit with an unbounded residual ended at 0.63 validation
  // accuracy, with one quantum at 0.74, against 0.81 uncompressed (docs/tuning.md). fp16
  // and int8 ignore it: their residual is half a rounding step at most.
  float residual_bound = 0;
};

// The codec for `spec` (which ValidateSpec accepts); null for kNone.
std::unique_ptr<GradientCodec> MakeCodec(const CompressionSpec& spec, const EncodeOptions& options = {});

// Shared by the codecs' rounded (push) encodings: a uniform float in [0, 1) from value
// `i` of stream `seed`, the same on every machine.
float UniformAt(uint64_t seed, int64_t i);

// Shared by 2bit's and 1bit's rounded (push) encodings: what a value carries into this
// push from its residual, nothing when the residual has the other sign than the value's
// new gradient. Both send a value short of a quantum as a whole quantum at random, so a
// value near zero overshoots and would owe the overshoot back against the direction its
// gradient keeps; paid back, that made much of what their bits carried a back-and-forth.
// Dropped, it leans the pushes toward the gradients' signs (a small gradient moves its
// weight by up to half a quantum a step, as in signSGD), no longer unbiased, and better:
// over 16 LeNet seeds 1bit went from 5.2 to 1.0 points below uncompressed, 2bit from 0.1
// below to 1.1 above; over 9 wide mlp seeds 1bit from 1.8 to 0.6 below, 2bit from 0.45
// below to 0.2 above (docs/tuning.md).
inline float CarriedResidual(float residual, float grad) { return residual * grad < 0 ? 0.0f : residual; }

// Shared by the codecs: the length check of Decode.
absl::Status CheckPackedBytes(const GradientCodec& codec, int64_t packed_bytes, int64_t numel);

}  // namespace dtrain::kv
