#include "common/kvstore_mode.h"

#include "absl/strings/str_cat.h"

namespace dtrain {
namespace {

constexpr KVStoreMode kAll[] = {KVStoreMode::kLocal, KVStoreMode::kDevice, KVStoreMode::kDistSync,
                                KVStoreMode::kDistDeviceSync, KVStoreMode::kDistAsync};

}  // namespace

const char* KVStoreModeName(KVStoreMode mode) {
  switch (mode) {
    case KVStoreMode::kLocal:
      return "local";
    case KVStoreMode::kDevice:
      return "device";
    case KVStoreMode::kDistSync:
      return "dist_sync";
    case KVStoreMode::kDistDeviceSync:
      return "dist_device_sync";
    case KVStoreMode::kDistAsync:
      return "dist_async";
  }
  return "?";
}

absl::StatusOr<KVStoreMode> ParseKVStoreMode(absl::string_view name) {
  for (KVStoreMode m : kAll) {
    if (name == KVStoreModeName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown kv-store '", name, "' (known: local, device, dist_sync, dist_device_sync, dist_async)"));
}

bool IsDistributed(KVStoreMode mode) {
  return mode == KVStoreMode::kDistSync || mode == KVStoreMode::kDistDeviceSync || mode == KVStoreMode::kDistAsync;
}

bool IsAsync(KVStoreMode mode) { return mode == KVStoreMode::kDistAsync; }

}  // namespace dtrain
