// How a shard store merges pushes and which optimizer it runs: set once per job by
// worker 0 (ParameterServer.Configure), and compared when it is set again.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/kv/epoch_lr.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/optimizer.h"

namespace dtrain::kv {

enum class MergeMode {
  // For each key and step, merge exactly one push from every worker (rank order, so
  // the sum is bit-reproducible), average, apply the optimizer once, bump the version.
  kSync,
  // Apply each push on arrival (no averaging); pulls return the current weights.
  kAsync,
  // Bounded staleness (SSP): steps merge exactly as in kSync, but a worker's push may
  // be up to `staleness` steps ahead of the key's version (held until its step comes),
  // and a pull after pushing step t waits only for version t + 1 - staleness.
  kSsp,
};

struct StoreConfig {
  MergeMode mode = MergeMode::kSync;
  int num_workers = 1;
  OptimizerOptions optimizer;
  // Sync only (ignored in async): each key also keeps its weights at the version before
  // the current one, so that a worker replacing a dead one can pull exactly the version
  // it must redo even where that step already merged (ShardStore::Pull,
  // PullMode::kExact; docs/recovery.md). Costs the weights once more in memory (not
  // the optimizer state); no copy per step: the optimizer writes the new weights into
  // the spare buffer and the two swap (Optimizer::UpdateInto). dtrain-server sets it
  // for dist_sync jobs; the in-process `local` kvstore, which has nobody to rejoin,
  // leaves it off.
  bool keep_previous_version = false;
  // kSsp: how many steps a worker may run ahead of the slowest (0..kMaxStaleness).
  // Each key then holds up to staleness more steps of pushes (num_workers gradients each).
  int staleness = 0;
  // Pull compression (kSync only; not kTwoBit, whose fixed quantum does not fit weight
  // deltas): each merged step's change to a key's weights is packed by this codec once,
  // the key's weights move by exactly the unpacked change, and what packing lost is
  // kept as one more slot of the key's state (after the optimizer's), so it is saved,
  // snapshotted and restored with the rest. ShardStore::PullDelta answers with the
  // packed change. kNone: the optimizer's weights as they are.
  CompressionType pull_compression = CompressionType::kNone;
  // An elastic job's --lr-step-epochs (kSync with a StepLr only; optimizer.lr_steps then
  // empty): the StepLr finds each step's epoch from the membership.
  EpochLrSteps epoch_lr;
};

inline constexpr int kMaxStaleness = 64;

// What one shard store may be made to hold, so that no request can make a server's
// memory grow without bound. dtrain-server sets them from --max-workers, --max-keys
// and --max-shard-bytes, and its errors name those flags; the defaults fit real
// models (a key is at most a 4 MB chunk, see placement.h) with room to spare.
struct StoreLimits {
  // Configure's num_workers. Per-worker state is only allocated as workers show up.
  int max_workers = 10000;
  // Keys held.
  int64_t max_keys = int64_t{1} << 20;
  // Bytes of weights plus optimizer state over all keys held (the weights counted
  // twice where StoreConfig::keep_previous_version keeps their previous version).
  int64_t max_bytes = int64_t{16} << 30;
};

const char* ModeName(MergeMode mode);  // "sync" / "async" / "ssp"

// What differs between two configs, e.g. "num_workers 2 vs 3; optimizer.momentum 0.9
// vs 0"; empty when they are the same.
std::string DescribeConfigDiff(const StoreConfig& a, const StoreConfig& b);

// What ShardStore::Configure refuses before anything else, INVALID_ARGUMENT naming the
// field: num_workers below 1 or over `limits.max_workers` (naming the cap and
// --max-workers); staleness outside 0..kMaxStaleness or outside kSsp; pull compression
// with an unknown codec, outside kSync, or 2bit.
absl::Status ValidateStoreConfig(const StoreConfig& config, const StoreLimits& limits);

}  // namespace dtrain::kv
