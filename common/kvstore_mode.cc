#include "common/kvstore_mode.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dtrain {
namespace {

constexpr KVStoreMode kAll[] = {KVStoreMode::kLocal,          KVStoreMode::kDevice,    KVStoreMode::kDistSync,
                                KVStoreMode::kDistDeviceSync, KVStoreMode::kDistAsync, KVStoreMode::kDistSsp};

}  // namespace

const char* KVStoreModeName(KVStoreMode mode) {
  switch (mode) {
    case KVStoreMode::kLocal: return "local";
    case KVStoreMode::kDevice: return "device";
    case KVStoreMode::kDistSync: return "dist_sync";
    case KVStoreMode::kDistDeviceSync: return "dist_device_sync";
    case KVStoreMode::kDistAsync: return "dist_async";
    case KVStoreMode::kDistSsp: return "dist_ssp";
  }
  return "?";
}

absl::StatusOr<KVStoreMode> ParseKVStoreMode(absl::string_view name) {
  for (KVStoreMode m : kAll) {
    if (name == KVStoreModeName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown kv-store '", name, "' (known: local, device, dist_sync, dist_device_sync, dist_async, dist_ssp)"));
}

bool IsDistributed(KVStoreMode mode) {
  return mode == KVStoreMode::kDistSync || mode == KVStoreMode::kDistDeviceSync || mode == KVStoreMode::kDistAsync ||
         mode == KVStoreMode::kDistSsp;
}

bool IsAsync(KVStoreMode mode) { return mode == KVStoreMode::kDistAsync; }

bool StepsAreExact(KVStoreMode mode) { return !IsAsync(mode) && mode != KVStoreMode::kDistSsp; }

int64_t PullVersionAfterPush(KVStoreMode mode, int64_t step, int staleness) {
  if (IsAsync(mode)) return 0;
  if (mode == KVStoreMode::kDistSsp) return std::max<int64_t>(0, step + 1 - staleness);
  return step + 1;
}

}  // namespace dtrain
