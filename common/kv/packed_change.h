// Pull compression (StoreConfig::pull_compression) for one key: the packed change that
// took its weights from one version to the next, kept so that a worker holding the
// older version may take it instead of the weights. A part of the shard store's key
// (key_entry.h): the store holds the key's lock around every call.
//
// Packing changes the weights too: they move by exactly what the packed bytes unpack
// to, added the way a worker adds them, so that its copy and the store's stay equal
// bit for bit. What packing lost (the residual, kept by the store as the last slot of
// the key's state) is sent with a later step's change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/kv/compression/gradient_codec.h"
#include "common/kv/shard_store.h"

namespace dtrain::kv {

class PackedChange {
 public:
  // A buffer of `numel` floats for the next weights where no previous version is kept
  // (PreviousWeights::spare otherwise); allocated on first use, then reused.
  float* Spare(int64_t numel);
  // The weights in Spare() become `*current` (their buffers swap).
  void TakeSpare(std::vector<float>* current) { current->swap(spare_); }

  // `next` holds the optimizer's weights for version `next_version` computed from
  // `current` (numel floats each). Packs their change plus `residual` with `codec`
  // (updating the residual), and rewrites `next` as `current` plus the unpacked change.
  void Pack(const GradientCodec& codec, const float* current, float* next, float* residual, int64_t numel,
            int64_t next_version);

  // Where the packed change to `current_version` is held and `held_version` is the one
  // before it (>= 0), fills `answer`'s delta fields; else leaves them.
  void Offer(const GradientCodec& codec, int64_t held_version, int64_t current_version, PullAnswer* answer) const;

  // No change is held any more (a restart or a rollback: until the next merge).
  void Forget() { version_ = -1; }
  // The version the held change leads to; -1: none.
  int64_t version() const { return version_; }

 private:
  std::string packed_;
  int64_t version_ = -1;
  std::vector<float> spare_;
};

}  // namespace dtrain::kv
