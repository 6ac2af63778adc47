// The kvstore mode (MXNet's --kv-store), parsed once from a flag or the wire into an
// enum, so that no other file compares mode strings.
#pragma once

#include <cstdint>
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
  // Bounded staleness (SSP): merged per step like kDistSync, but a worker may run up to
  // --staleness S steps ahead of the slowest; S = 0 is kDistSync bit for bit.
  kDistSsp,
};

// "local", "device", "dist_sync", "dist_device_sync", "dist_async", "dist_ssp"; anything else is
// INVALID_ARGUMENT listing those.
absl::StatusOr<KVStoreMode> ParseKVStoreMode(absl::string_view name);
// The name ParseKVStoreMode accepts for `mode`.
const char* KVStoreModeName(KVStoreMode mode);

// Needs a scheduler and parameter servers (the dist_* modes).
bool IsDistributed(KVStoreMode mode);
// Pushes are applied on arrival, not merged per step.
bool IsAsync(KVStoreMode mode);
// Every worker computes step t from exactly version t of the weights, so a step can be
// redone bit for bit (rejoin, rollback): the sync modes, not async nor SSP.
bool StepsAreExact(KVStoreMode mode);
// The version a worker's pull after pushing `step` must wait for: step + 1 in sync,
// step + 1 - staleness in SSP (never below 0), 0 (whatever is there) in async.
int64_t PullVersionAfterPush(KVStoreMode mode, int64_t step, int staleness);

}  // namespace dtrain
