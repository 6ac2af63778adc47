// What ShardStore::Configure builds from a StoreConfig, once: the optimizer, the merge
// rule, the pull codec, the fence and the rest that every Push and Pull reads. Private
// to the shard store (a header of its own only to keep shard_store.cc to one job).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/heard_from.h"
#include "common/kv/key_snapshots.h"
#include "common/kv/merge_rule.h"
#include "common/kv/optimizer.h"
#include "common/kv/shard_store.h"
#include "common/kv/step_lr.h"
#include "common/kv/step_ranks.h"
#include "common/kv/store_config.h"
#include "common/kv/worker_fence.h"

namespace dtrain::kv {

// Immutable once made, so whoever got it from the store reads it without a lock (the
// heard-from times and the fence are thread-safe on their own).
struct StoreSetup {
  StoreConfig config;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<MergeRule> rule;
  StoreObserver* observer = nullptr;  // null: none
  // When each worker was last heard from.
  std::unique_ptr<HeardFrom> heard;
  // Job id and per-rank incarnations (docs/recovery.md).
  std::unique_ptr<WorkerFence> fence;
  // Keys keep their previous version's weights (sync with keep_previous_version).
  bool keep_previous = false;
  // Pull compression (StoreConfig::pull_compression; null: none), and the state floats
  // per element: the optimizer's slots, then the pull residual's one.
  std::unique_ptr<GradientCodec> pull_codec;
  int64_t optimizer_slots = 0;
  int64_t state_slots = 0;
  // Elastic (ShardStore::SetStepRanks): the ranks each step merges; null: 0..num_workers-1.
  const StepRanks* step_ranks = nullptr;
  // Elastic (ShardStore::SetStepLr): each step's lr factor; null: none.
  const StepLr* step_lr = nullptr;
  // Server snapshots (sync only; none in the other modes).
  SnapshotHook snapshots;
};

// The setup for a `config` that ValidateStoreConfig accepted; `snapshots` is kept in
// sync mode only. `step_ranks` (null: none) makes the rule a RankSetMergeRule; with
// another mode than sync it is INVALID_ARGUMENT. Fails as CreateOptimizer does. The
// fence starts with no job id.
absl::StatusOr<std::unique_ptr<StoreSetup>> MakeStoreSetup(const StoreConfig& config, StoreObserver* observer,
                                                           SnapshotHook snapshots,
                                                           const StepRanks* step_ranks = nullptr);

}  // namespace dtrain::kv
