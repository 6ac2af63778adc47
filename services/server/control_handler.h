// The parameter server's control calls without gRPC: Configure, InitKeys and
// GetVersions, and what GetState streams. Each takes the v1 request, checks it, makes
// the ShardStore calls and builds the answer; the status it returns is the call's
// (code and text as the worker sees them). PsService's methods add only what needs the
// gRPC context (the caller's identity, NodeChecks) and the reactors; the worker's
// in-process test channel calls the same methods, so both answer alike by
// construction. The PushPull stream has its own such handler (kv::PushPullHandler).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/parameter_server.pb.h"

namespace dtrain::server {

class ReplicaCatchUp;
class ServerMembership;

// The longest replica chain a request may name (KeyInit.chain, joined servers).
inline constexpr int kMaxChainLength = 64;

struct ControlOptions {
  // Accept initial weights and optimizer state holding NaN or Inf (dtrain-server
  // --allow-non-finite) instead of refusing them.
  bool allow_non_finite = false;
  // Replication: told each accepted Configure and each key's chain, so that a restarted
  // chain member can be set up the same way (null: none). Must outlive the handler.
  ReplicaCatchUp* catch_up = nullptr;
  // Elastic jobs (docs/elastic.md): the store is configured for the ranks' bound,
  // --elastic's MAX, whatever worker count (1 .. MAX) worker 0's Configure says, once
  // the server has the job's membership (a Configure waits up to membership_wait for
  // it). Null: not elastic. Must outlive the handler.
  ServerMembership* membership = nullptr;
  absl::Duration membership_wait = absl::Seconds(10);
};

class ControlHandler {
 public:
  // `store` must outlive the handler. Thread-safe as the store is.
  ControlHandler(kv::ShardStore* store, ControlOptions options) : store_(store), options_(options) {}

  // Sets the store up (mode, workers, optimizer, pull compression). Refused with
  // INVALID_ARGUMENT: oversized names or lists, a mode no server serves, an unknown
  // pull_compression; the store's own refusals (another setup than the first) as the
  // store words them. Elastic: ServerMembership::ConfigureWorkers' refusals.
  absl::Status Configure(const v1::ConfigureRequest& req) const;
  // Adds the keys in order; the first refusal ends the call (earlier keys stay). Each
  // key: DTYPE_FLOAT32, whole floats, finite (unless allow_non_finite), a chain of at
  // most kMaxChainLength, and what ShardStore::InitKey accepts.
  absl::Status InitKeys(const v1::InitKeysRequest& req) const;
  // The versions of the keys asked for (all held keys when none is named). A worker
  // rank >= 0 is admitted first: the asking incarnation takes its rank here already,
  // so a process it replaces is cut off before the newcomer's first push.
  absl::Status GetVersions(const v1::GetVersionsRequest& req, v1::GetVersionsResponse* resp) const;
  // GetState, in two parts so that the stream copies one key at a time: the keys it
  // will send (all held keys when none is named; asking for more keys than are held,
  // or a key not held, is refused before any is copied) ...
  absl::StatusOr<std::vector<uint64_t>> StateKeys(const v1::GetStateRequest& req) const;
  // ... and one key's message, snapshotted now.
  absl::Status KeyStateOf(uint64_t key, v1::KeyState* out) const;

 private:
  kv::ShardStore* store_;
  ControlOptions options_;
};

// "dist_sync" / "dist_device_sync" -> kSync, "dist_ssp" -> kSsp, "dist_async" -> kAsync (through
// ParseKVStoreMode); else INVALID_ARGUMENT.
absl::StatusOr<kv::MergeMode> ParseKvStore(const std::string& kv_store);
// The merge rule a Configure asks for: its `mode`, else (an older worker) its
// `kv_store` name; both set and different, or a mode no server serves, is INVALID_ARGUMENT.
absl::StatusOr<kv::MergeMode> MergeModeOf(const v1::ConfigureRequest& req);

// Proto3 zeros that mean "unset" become defaults: name "" -> "sgd", rescale_grad 0 -> 1,
// lr_factor 0 -> 1.
kv::OptimizerOptions OptimizerFromProto(const v1::OptimizerConfig& p);

}  // namespace dtrain::server
