#include "common/kvstore_mode_wire.h"

#include "absl/strings/str_cat.h"

namespace dtrain {

v1::KvStoreMode ToProto(KVStoreMode mode) {
  switch (mode) {
    case KVStoreMode::kLocal: return v1::KV_STORE_MODE_LOCAL;
    case KVStoreMode::kDevice: return v1::KV_STORE_MODE_DEVICE;
    case KVStoreMode::kDistSync: return v1::KV_STORE_MODE_DIST_SYNC;
    case KVStoreMode::kDistDeviceSync: return v1::KV_STORE_MODE_DIST_DEVICE_SYNC;
    case KVStoreMode::kDistAsync: return v1::KV_STORE_MODE_DIST_ASYNC;
    case KVStoreMode::kDistSsp: return v1::KV_STORE_MODE_DIST_SSP;
  }
  return v1::KV_STORE_MODE_UNSPECIFIED;
}

absl::StatusOr<KVStoreMode> KVStoreModeFromProto(v1::KvStoreMode mode) {
  switch (mode) {
    case v1::KV_STORE_MODE_LOCAL: return KVStoreMode::kLocal;
    case v1::KV_STORE_MODE_DEVICE: return KVStoreMode::kDevice;
    case v1::KV_STORE_MODE_DIST_SYNC: return KVStoreMode::kDistSync;
    case v1::KV_STORE_MODE_DIST_DEVICE_SYNC: return KVStoreMode::kDistDeviceSync;
    case v1::KV_STORE_MODE_DIST_ASYNC: return KVStoreMode::kDistAsync;
    case v1::KV_STORE_MODE_DIST_SSP: return KVStoreMode::kDistSsp;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown kv-store mode ", static_cast<int>(mode),
                                                 mode == v1::KV_STORE_MODE_UNSPECIFIED ? " (unspecified)" : ""));
}

absl::StatusOr<KVStoreMode> KVStoreModeOf(v1::KvStoreMode mode, absl::string_view legacy_name) {
  if (mode == v1::KV_STORE_MODE_UNSPECIFIED) {
    if (legacy_name.empty()) return absl::InvalidArgumentError("no kv-store mode: neither mode nor kv_store is set");
    return ParseKVStoreMode(legacy_name);
  }
  absl::StatusOr<KVStoreMode> m = KVStoreModeFromProto(mode);
  if (!m.ok() || legacy_name.empty()) return m;
  if (legacy_name != KVStoreModeName(*m)) {
    return absl::InvalidArgumentError(absl::StrCat("mode ", KVStoreModeName(*m), " and kv_store \"", legacy_name,
                                                   "\" name different kv-store modes"));
  }
  return m;
}

}  // namespace dtrain
