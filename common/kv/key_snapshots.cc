#include "common/kv/key_snapshots.h"

#include "absl/strings/str_cat.h"

namespace dtrain::kv {

absl::Status CheckRestoreCount(int64_t step, size_t snapshot_keys, size_t held) {
  if (snapshot_keys == held) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("restoring step ", step, ": the snapshot has ", snapshot_keys, " keys, this server holds ", held));
}

absl::Status CheckRestoredKey(const KeyState& ks, int64_t step, int64_t numel, int64_t state_slots) {
  if (ks.version == step && static_cast<int64_t>(ks.values.size()) == numel &&
      static_cast<int64_t>(ks.optimizer_state.size()) == state_slots * numel) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("restoring step ", step, ": key ", ks.key, " is at version ",
                                                 ks.version, " with ", ks.values.size(), " values and ",
                                                 ks.optimizer_state.size(), " state floats; the key has ", numel,
                                                 " elements and ", state_slots * numel, " state floats"));
}

}  // namespace dtrain::kv
