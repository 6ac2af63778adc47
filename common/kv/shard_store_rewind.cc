// ShardStore's ways of taking progress back (docs/recovery.md, docs/elastic.md): the
// rollback to a snapshot, the drop of a dead worker's step. Kept apart from the pushes and pulls of shard_store.cc.
#include "common/kv/shard_store.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/kv/key_checks.h"
#include "common/kv/shard_store.h"
#include "common/kv/shard_store_impl.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::kv {

absl::Status ShardStore::Restore(const std::vector<KeyState>& keys, int64_t step) {
  std::vector<std::pair<const KeyState*, KeyEntry*>> found;
  const StoreSetup* setup = nullptr;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    setup = impl_->setup.get();
    if (setup == nullptr) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
    DTRAIN_RETURN_IF_ERROR(CheckRestoreCount(step, keys.size(), impl_->keys.size()));
    // Everything is checked before anything changes: a rollback is all or nothing.
    for (const KeyState& ks : keys) {
      auto it = impl_->keys.find(ks.key);
      if (it == impl_->keys.end()) {
        return absl::NotFoundError(absl::StrCat("restoring step ", step, ": key ", ks.key, " is not held here"));
      }
      DTRAIN_RETURN_IF_ERROR(CheckRestoredKey(ks, step, it->second->numel, setup->state_slots));
      found.emplace_back(&ks, it->second.get());
    }
  }
  const std::string why = absl::StrCat("rolled back to step ", step);
  for (auto& [ks, k] : found) {
    absl::MutexLock lock(&k->mu);
    impl_->CountParked(setup, -k->RollBack(*ks, absl::AbortedError(absl::StrCat(why, " (pull of key ", ks->key, ")"))));
  }
  DTRAIN_LOG(WARNING) << why << ": " << found.size() << " keys restored";
  return absl::OkStatus();
}

absl::Status ShardStore::DropPendingStep(int64_t step, const absl::Status& why) {
  std::vector<std::pair<uint64_t, KeyEntry*>> all;
  const StoreSetup* setup = nullptr;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    setup = impl_->setup.get();
    if (setup == nullptr) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
    DTRAIN_RETURN_IF_ERROR(impl_->Find({}, &all));
  }
  // Every key first: a step is taken back on all keys or on none (a key past it holds
  // the dead worker's merged push, which no drop can take out of its weights).
  for (auto& [key, k] : all) {
    absl::MutexLock lock(&k->mu);
    if (k->version != step) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot drop the pushes pending for step ", step, ": key ", key, " is at version ", k->version));
    }
  }
  int64_t dropped = 0;
  for (auto& [key, k] : all) {
    absl::MutexLock lock(&k->mu);
    const int64_t failed = k->DropPending(why);
    impl_->CountParked(setup, -failed);
    dropped += failed;
  }
  DTRAIN_LOG(WARNING) << "dropped the pushes pending for step " << step << " on " << all.size() << " keys (" << dropped
                      << " parked pulls answered): " << why.message();
  return absl::OkStatus();
}

}  // namespace dtrain::kv
