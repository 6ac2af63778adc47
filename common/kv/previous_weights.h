// One key's weights of the version before the current one, kept for exact pulls (a
// worker redoing a step that this key already merged, docs/recovery.md;
// StoreConfig::keep_previous_version). A part of the shard store's key (key_entry.h):
// the store holds the key's lock around every call.
//
// The buffer is allocated once with the key. Each merged step writes its new weights
// into spare() and Advance swaps the buffers: the old weights become the previous
// version with no copy and no allocation. Only the weights are kept, not the optimizer
// state: a redone step's push of this key is for a merged step and ignored, so only
// what the redone gradients are computed from is needed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::kv {

class PreviousWeights {
 public:
  // `keep` false: nothing is held, and kept() says so.
  PreviousWeights(bool keep, int64_t numel) : kept_(keep), weights_(keep ? static_cast<size_t>(numel) : 0) {}

  bool kept() const { return kept_; }

  // Where the next version's weights are written before Advance (kept() only).
  float* spare() { return weights_.data(); }

  // The weights in spare() become `*current`, and `*current`'s, of `version`, the
  // previous ones.
  void Advance(std::vector<float>* current, int64_t version) {
    current->swap(weights_);
    version_ = version;
  }

  // The weights of exactly version `v` if they are the ones held, else null.
  const float* At(int64_t v) const { return v >= 0 && v == version_ ? weights_.data() : nullptr; }

  // The version held; -1 before a step merged here, after Forget, or when not kept.
  int64_t version() const { return version_; }

  // Nothing is held any more (a rollback: these weights are of the abandoned timeline).
  void Forget() { version_ = -1; }

  // What an exact pull can get, for its refusal: "the key holds version 7 and its
  // previous, 6", or why only the current one.
  std::string HeldText(int64_t current_version) const;

 private:
  const bool kept_;
  std::vector<float> weights_;  // empty when not kept
  int64_t version_ = -1;
};

}  // namespace dtrain::kv
