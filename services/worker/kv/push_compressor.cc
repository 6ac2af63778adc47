#include "services/worker/kv/push_compressor.h"

namespace dtrain::worker {

PushCompressor::PushCompressor(const kv::CompressionSpec& spec, double gradient_scale) : wire_spec_(spec) {
  if (wire_spec_.type == kv::CompressionType::kTwoBit) {
    wire_spec_.threshold = static_cast<float>(spec.threshold / gradient_scale);
  }
  codec_ = kv::MakeCodec(wire_spec_, kv::EncodeOptions{kPushResidualBound});
  if (wire_spec_.type == kv::CompressionType::kTwoBit) two_bit_ = static_cast<const kv::TwoBitCodec*>(codec_.get());
  if (wire_spec_.type == kv::CompressionType::kOneBit) one_bit_ = static_cast<const kv::OneBitCodec*>(codec_.get());
}

void PushCompressor::Reset(const kv::Placement& placement) {
  residual_.clear();
  packed_.clear();
  packs_.clear();
  if (codec_ == nullptr) return;
  for (const auto& slice : placement.slices) {
    residual_.emplace_back(static_cast<size_t>(slice.length), 0.0f);
    packed_.emplace_back(static_cast<size_t>(codec_->PackedBytes(slice.length)), '\0');
    packs_.push_back(0);
  }
}

PushData PushCompressor::Pack(size_t i, const float* grad, int64_t numel) {
  std::string& packed = packed_[i];
  // One random stream per slice and push: the same bytes whatever the order of the packs.
  const uint64_t seed = (static_cast<uint64_t>(i) << 40) ^ packs_[i]++;
  if (two_bit_ != nullptr) {
    two_bit_->EncodeRounded(grad, residual_[i].data(), numel, packed.data(), seed);
  } else if (one_bit_ != nullptr) {
    one_bit_->EncodeRounded(grad, residual_[i].data(), numel, packed.data(), seed);
  } else {
    codec_->Encode(grad, residual_[i].data(), numel, packed.data());
  }
  PushData data;
  data.bytes = packed.data();
  data.size = static_cast<int64_t>(packed.size());
  data.numel = numel;
  data.compression = wire_spec_;
  return data;
}

}  // namespace dtrain::worker
