// Server snapshots of a shard store's keys (docs/recovery.md): when a key's copy goes
// to the snapshot writer, and whether a snapshot may replace the keys held (a
// rollback). The store keeps the keys and their locks; this decides and checks.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/kv/key_state.h"
#include "common/kv/shard_store.h"

namespace dtrain::kv {

// Hands a copy of a key's state to a SnapshotSink each time the key's version reaches
// a multiple of `every`. Immutable once made: read without a lock.
class SnapshotHook {
 public:
  // None: never due.
  SnapshotHook() = default;
  // `every` <= 0 or a null `sink`: never due.
  SnapshotHook(int64_t every, SnapshotSink sink) : every_(every), sink_(std::move(sink)) {}

  // Whether a key that just reached `version` is copied.
  bool Due(int64_t version) const { return every_ > 0 && sink_ != nullptr && version % every_ == 0; }

  // A key just reached `state.version`: when due, hands `state` to the sink, with the
  // key's lock still held so that the next merge cannot start before it returns.
  // `make_state` builds the copy only when due.
  template <typename MakeState>
  void AtVersion(int64_t version, MakeState make_state) const {
    if (Due(version)) sink_(make_state());
  }

 private:
  int64_t every_ = 0;
  SnapshotSink sink_;
};

// A rollback is all or nothing, so every key is checked before any changes.
// INVALID_ARGUMENT when the snapshot of `step` holds another number of keys than the
// `held` keys of this store: "restoring step 40: the snapshot has 3 keys, this server
// holds 4".
absl::Status CheckRestoreCount(int64_t step, size_t snapshot_keys, size_t held);
// INVALID_ARGUMENT unless `ks` is at version `step` and holds `numel` weights and
// `state_slots` * numel state floats (the key's), naming both.
absl::Status CheckRestoredKey(const KeyState& ks, int64_t step, int64_t numel, int64_t state_slots);

}  // namespace dtrain::kv
