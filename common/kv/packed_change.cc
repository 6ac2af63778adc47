#include "common/kv/packed_change.h"

#include "common/kv/vector_ops.h"

namespace dtrain::kv {

float* PackedChange::Spare(int64_t numel) {
  spare_.resize(static_cast<size_t>(numel));
  return spare_.data();
}

void PackedChange::Pack(const GradientCodec& codec, const float* current, float* next, float* residual, int64_t numel,
                        int64_t next_version) {
  SubtractFrom(next, current, numel);  // the change the optimizer asks for
  packed_.resize(static_cast<size_t>(codec.PackedBytes(numel)));
  codec.Encode(next, residual, numel, packed_.data());
  // The length is the codec's own: Decode cannot refuse it.
  codec.Decode(packed_.data(), static_cast<int64_t>(packed_.size()), next, numel).IgnoreError();
  AddInto(next, current, numel);
  version_ = next_version;
}

void PackedChange::Offer(const GradientCodec& codec, int64_t held_version, int64_t current_version,
                         PullAnswer* answer) const {
  if (held_version < 0 || held_version + 1 != current_version || version_ != current_version) return;
  answer->delta = packed_.data();
  answer->delta_bytes = static_cast<int64_t>(packed_.size());
  answer->delta_type = codec.type();
}

}  // namespace dtrain::kv
