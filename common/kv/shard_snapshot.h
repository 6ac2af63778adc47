// A parameter server's snapshot of its shard at one step boundary
// (docs/recovery.md "Servers: snapshots and rollback"): every key's weights, optimizer
// state and version, plus the store's configuration, so that a restarted server can
// configure itself and load the shard without any worker's help.
//
//   DIR/server-<rank>-step-<step>.snapshot
//
// The file uses the checkpoint library's framing (common/checkpoint/checkpoint_codec.h:
// magic, version, body, CRC-32 of everything before it) and is written atomically
// (WriteFileAtomically: temp file, fsync, rename), so a file under its real name is
// either complete or refused with DATA_LOSS naming it. Nothing read from a file is
// trusted for a size: every count is checked against the bytes left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/kv/key_state.h"
#include "common/kv/store_config.h"

namespace dtrain::kv {

struct ShardSnapshot {
  int server_rank = 0;
  int64_t step = 0;            // every key's version
  std::string job_id;          // a snapshot of another job is never loaded
  StoreConfig config;          // what Configure set, so a restarted server needs no worker to configure it
  std::vector<KeyState> keys;  // ascending key; shape, version, values and optimizer state
};

// DIR/server-<rank>-step-<step>.snapshot
std::string ShardSnapshotPath(const std::string& dir, int server_rank, int64_t step);

// Writes `snap` atomically to ShardSnapshotPath (creating `dir` if needed). Refuses
// (INVALID_ARGUMENT) a key whose version is not `snap.step` or whose shape does not
// hold its values: a snapshot is one step boundary or nothing.
absl::Status WriteShardSnapshot(const std::string& dir, const ShardSnapshot& snap);

// DATA_LOSS naming the file for a bad magic, a CRC mismatch, truncation or an
// impossible count; NOT_FOUND when it does not exist.
absl::StatusOr<ShardSnapshot> ReadShardSnapshot(const std::string& path);

// The steps S for which DIR/server-<rank>-step-S.snapshot exists (names only, nothing
// read), newest first. Empty when `dir` does not exist.
std::vector<int64_t> ListShardSnapshotSteps(const std::string& dir, int server_rank);

// The steps whose snapshot of `server_rank` reads back intact and belongs to `job_id`
// (any job when empty), newest first. Every file refused is named in the log with why
// (a server killed mid-write leaves only a temp file, but a disk can still corrupt one).
std::vector<int64_t> CompleteShardSnapshotSteps(const std::string& dir, int server_rank, const std::string& job_id);

// Removes DIR/server-<rank>-step-<step>.snapshot (OK when it is not there).
absl::Status RemoveShardSnapshot(const std::string& dir, int server_rank, int64_t step);

}  // namespace dtrain::kv
