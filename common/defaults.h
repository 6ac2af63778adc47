// The job's defaults (deadlines, intervals, the kvstore mode), in one place. Every
// role, the launcher and the option structs behind their flags take them from here, so
// that a flag's default and the struct a test or another caller fills cannot drift apart.
#pragma once

#include <cstdint>

#include "common/kvstore_mode.h"

namespace dtrain {

// --sync-timeout: how long a step (a worker's pull, a server's parked pull) waits for the
// other workers' pushes before it fails naming who is missing.
inline constexpr int64_t kDefaultSyncTimeoutSeconds = 120;
// --register-timeout: how long the scheduler, and each node, wait for the whole job to
// register (and a node to register again with a restarted scheduler).
inline constexpr int64_t kDefaultRegisterTimeoutSeconds = 120;
// --connect-timeout: how long a worker waits to reach each server at start.
inline constexpr int64_t kDefaultConnectTimeoutSeconds = 120;

// --heartbeat-interval: how often each node tells the scheduler it is alive.
inline constexpr int64_t kDefaultHeartbeatIntervalSeconds = 1;
// --heartbeat-timeout: the silence after which the scheduler declares a node dead.
inline constexpr int64_t kDefaultHeartbeatTimeoutSeconds = 10;

// dtrain launch --stop-grace: SIGTERM, then SIGKILL this long after.
inline constexpr int64_t kDefaultStopGraceSeconds = 10;
// dtrain launch --finish-grace: once the workers finished, the others must exit within this.
inline constexpr int64_t kDefaultFinishGraceSeconds = 30;
// dtrain launch --restart-backoff: before a child's first restart (doubled for each further one).
inline constexpr int64_t kDefaultRestartBackoffSeconds = 1;

// --kv-store of the scheduler, `dtrain launch` and `dtrain run`'s workers: every worker
// holds the same weights, bit for bit.
inline constexpr KVStoreMode kDefaultJobMode = KVStoreMode::kDistSync;
// --kv-store of a worker on its own: MXNet's train_mnist.py default.
inline constexpr KVStoreMode kDefaultWorkerMode = KVStoreMode::kLocal;

}  // namespace dtrain
