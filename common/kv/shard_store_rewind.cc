// ShardStore's ways of taking progress back (docs/recovery.md, docs/elastic.md): the
// rollback to a snapshot. Kept apart from the pushes and pulls of shard_store.cc.
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

}  // namespace dtrain::kv
