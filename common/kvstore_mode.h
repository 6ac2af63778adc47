// The kvstore mode (MXNet's --kv-store), parsed once from a flag or the wire into an
// enum, so that no other file compares mode strings.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtrain {

enum class KVStoreMode {
  kLocal,           // one process, optimizer in-process
  kDevice,          // one process, gradients aggregated over its devices first
  kDistSync,        // parameter servers; every step merges one push per worker
  kDistDeviceSync,  // as kDistSync, after local aggregation over the worker's devices
  kDistAsync,       // parameter servers; pushes applied on arrival
};

// "local", "device", "dist_sync", "dist_device_sync", "dist_async"; anything else is
// INVALID_ARGUMENT listing those.
absl::StatusOr<KVStoreMode> ParseKVStoreMode(absl::string_view name);
// The name ParseKVStoreMode accepts for `mode`.
const char* KVStoreModeName(KVStoreMode mode);

// Needs a scheduler and parameter servers (the dist_* modes).
bool IsDistributed(KVStoreMode mode);
// Pushes are applied on arrival, not merged per step.
bool IsAsync(KVStoreMode mode);

}  // namespace dtrain
