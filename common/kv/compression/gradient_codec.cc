#include "common/kv/compression/gradient_codec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/kv/compression/fp16_codec.h"
#include "common/kv/compression/int8_codec.h"
#include "common/kv/compression/one_bit_codec.h"
#include "common/kv/compression/two_bit_codec.h"

namespace dtrain::kv {

absl::StatusOr<CompressionType> ParseCompressionType(absl::string_view name) {
  if (name == "none") return CompressionType::kNone;
  if (name == "2bit") return CompressionType::kTwoBit;
  if (name == "1bit") return CompressionType::kOneBit;
  if (name == "fp16") return CompressionType::kFp16;
  if (name == "int8") return CompressionType::kInt8;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown gradient compression \"", name, "\" (want none, 2bit, 1bit, fp16 or int8)"));
}

const char* CompressionTypeName(CompressionType type) {
  switch (type) {
    case CompressionType::kTwoBit: return "2bit";
    case CompressionType::kOneBit: return "1bit";
    case CompressionType::kFp16: return "fp16";
    case CompressionType::kInt8: return "int8";
    default: return "none";
  }
}

absl::Status ValidateSpec(const CompressionSpec& spec) {
  switch (spec.type) {
    case CompressionType::kNone:
    case CompressionType::kOneBit:
    case CompressionType::kFp16:
    case CompressionType::kInt8: return absl::OkStatus();
    case CompressionType::kTwoBit:
      if (!std::isfinite(spec.threshold) || spec.threshold <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("2bit compression threshold ", spec.threshold, " must be finite and > 0"));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown gradient compression ", static_cast<int>(spec.type)));
}

std::unique_ptr<GradientCodec> MakeCodec(const CompressionSpec& spec, const EncodeOptions& options) {
  switch (spec.type) {
    case CompressionType::kTwoBit: return std::make_unique<TwoBitCodec>(spec.threshold, options.residual_bound);
    case CompressionType::kOneBit: return std::make_unique<OneBitCodec>(options.residual_bound);
    case CompressionType::kFp16: return std::make_unique<Fp16Codec>();
    case CompressionType::kInt8: return std::make_unique<Int8Codec>();
    default: return nullptr;
  }
}

float UniformAt(uint64_t seed, int64_t i) {
  // splitmix64's finaliser over the seed and the index.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 bits: exact in a float
}

absl::Status CheckPackedBytes(const GradientCodec& codec, int64_t packed_bytes, int64_t numel) {
  const int64_t want = codec.PackedBytes(numel);
  if (packed_bytes == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(CompressionTypeName(codec.type()), " data has ", packed_bytes,
                                                 " bytes, want ", want, " for ", numel, " values"));
}

}  // namespace dtrain::kv
