// What a shard store checks of a key it is asked to make (ShardStore::InitKey), and
// what the key will cost it; everything that needs no store. Shapes come from the wire.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/kv/compression/gradient_codec.h"

namespace dtrain::kv {

// The most dimensions a key's shape may have (the shape is kept with the key and not
// counted in the byte cap).
inline constexpr size_t kMaxKeyDims = 32;

// "[2,3,4]".
std::string ShapeText(const std::vector<int64_t>& shape);

// INVALID_ARGUMENT, naming the key, for a shape over kMaxKeyDims dimensions, one that
// does not hold `numel` elements (a negative dimension, or a product over int64),
// missing `values` for numel > 0, or a negative `version`.
absl::Status CheckNewKey(uint64_t key, const std::vector<int64_t>& shape, const float* values, int64_t numel,
                         int64_t version);

// The bytes a key of `numel` elements holds (what StoreLimits::max_bytes caps): its
// weights (twice with `keep_previous`), `state_floats` of optimizer state and, with
// `pull_codec` (null: none), the packed change plus a spare buffer for the weights
// where no previous version is kept. numel and state_floats are bounded by the bytes
// that came with the request.
int64_t KeyBytes(int64_t numel, int64_t state_floats, bool keep_previous, const GradientCodec* pull_codec);

// What to add to the error for a resumed key whose optimizer state has `have` floats where
// the store wants `want`: when that is exactly one pull residual (`numel` floats) off, the
// likeliest cause, since a compressed --gc-type brings a compressed pull unless
// --pull-gc-type says otherwise (a checkpoint written before that default has none).
// Empty otherwise. `pull_packed`: the store packs pulls.
std::string PullResidualHint(bool pull_packed, int64_t have, int64_t want, int64_t numel);

}  // namespace dtrain::kv
