// A shard store's record of one key: its weights, optimizer state and the merging of
// pushes in progress, with its parts (parked pulls, previous weights, packed change,
// SSP's held pushes), each a type of its own. Private to the shard store
// (shard_store.cc, key_update.cc); nothing else should include it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/status/status.h"
#include "common/kv/ahead_steps.h"
#include "common/kv/key_state.h"
#include "common/kv/merge_rule.h"
#include "common/kv/packed_change.h"
#include "common/kv/parked_pulls.h"
#include "common/kv/previous_weights.h"
#include "common/kv/shard_store.h"
#include "common/kv/step_ranks.h"

namespace dtrain::kv {

// One key. `shape` and `numel` are fixed at creation; the rest is guarded by `mu`.
struct KeyEntry {
  // `keep_previous`: hold a second buffer of weights for the previous version
  // (StoreConfig::keep_previous_version), allocated here once; each merged step
  // writes the new weights into it and swaps the two.
  KeyEntry(std::vector<int64_t> shape_in, int64_t version_in, std::vector<float> values_in, std::vector<float> state_in,
           int num_workers, bool keep_previous)
      : shape(std::move(shape_in)),
        numel(static_cast<int64_t>(values_in.size())),
        version(version_in),
        values(std::move(values_in)),
        state(std::move(state_in)),
        previous(keep_previous, numel),
        num_workers(num_workers) {}

  // Whether the weights at exactly version `v` are held (the current ones, or the
  // previous ones where kept); if so, *out points at them.
  bool WeightsAt(int64_t v, const float** out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (v == version) {
      *out = values.data();
      return true;
    }
    *out = previous.At(v);
    return *out != nullptr;
  }

  // Per-worker state is grown up to the highest rank seen, when it is first needed,
  // not sized for num_workers up front: a job configured for many workers costs
  // nothing per key until they come.
  void SeeWorker(int w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const size_t n = static_cast<size_t>(w) + 1;
    if (has_pending.size() >= n) return;
    pending.resize(n);
    has_pending.resize(n, false);
    last_push_step.resize(n, -1);
    last_pull_version.resize(n, -1);
  }

  // The workers whose push for step `version` has not arrived: of ranks 0 ..
  // num_workers - 1, or of the step's ranks where `ranks` (elastic) names them.
  std::vector<int> Missing(const StepRanks* ranks = nullptr) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto absent = [this](int w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return w >= static_cast<int>(has_pending.size()) || !has_pending[w];
    };
    std::vector<int> missing;
    if (ranks != nullptr) {
      for (int w : ranks->RanksAt(version)) {
        if (absent(w)) missing.push_back(w);
      }
      return missing;
    }
    for (int w = 0; w < num_workers; ++w) {
      if (absent(w)) missing.push_back(w);
    }
    return missing;
  }

  // What the merge rule decides on, for worker `w`'s push or pull of key `key`
  // (after SeeWorker(w)).
  // `step`: the step of the push being decided (-1 for a pull).
  KeyProgress Progress(uint64_t key, int w, int64_t step = -1) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    KeyProgress p;
    p.key = key;
    p.version = version;
    p.pending_count = pending_count;
    p.worker_pending = has_pending[w];
    p.worker_last_push = last_push_step[w];
    p.worker_ahead = ahead.Holds(step, w);
    return p;
  }

  // Rollback to `ks` (checked by CheckRestoredKey): its weights, state and version;
  // nothing of the abandoned timeline stays (the previous weights, the packed change,
  // the workers' push and pull records, pending and ahead pushes), and parked pulls fail
  // with `why`. Returns how many failed.
  int64_t RollBack(const KeyState& ks, const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::copy(ks.values.begin(), ks.values.end(), values.begin());
    std::copy(ks.optimizer_state.begin(), ks.optimizer_state.end(), state.begin());
    version = ks.version;
    previous.Forget();
    packed.Forget();
    std::fill(last_push_step.begin(), last_push_step.end(), -1);
    std::fill(last_pull_version.begin(), last_pull_version.end(), -1);
    const int64_t failed = parked.FailAll(why, version);
    std::fill(has_pending.begin(), has_pending.end(), false);
    pending_count = 0;
    waiting_since = absl::InfiniteFuture();  // nothing waits any more
    ahead.clear();
    return failed;
  }

  // A dead worker's removal (ShardStore::DropPendingStep): the pushes pending for
  // step `version` are forgotten, each worker's as if it had not been made (its last
  // push step goes back to the step before), and parked pulls fail with `why`.
  // Returns how many failed.
  int64_t DropPending(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (size_t w = 0; w < has_pending.size(); ++w) {
      if (has_pending[w]) last_push_step[w] = std::min(last_push_step[w], version - 1);
    }
    std::fill(has_pending.begin(), has_pending.end(), false);
    pending_count = 0;
    const int64_t failed = parked.FailAll(why, version);
    waiting_since = absl::InfiniteFuture();  // nothing waits any more
    return failed;
  }

  absl::Mutex mu;
  const std::vector<int64_t> shape;
  const int64_t numel;
  int64_t version ABSL_GUARDED_BY(mu);
  std::vector<float> values ABSL_GUARDED_BY(mu);
  std::vector<float> state ABSL_GUARDED_BY(mu);
  // StoreConfig::keep_previous_version (sync): the weights of the version before
  // `version`, for exact pulls.
  PreviousWeights previous ABSL_GUARDED_BY(mu);
  const int num_workers;
  // Per worker (indexed by rank, grown by SeeWorker). Sync: each worker's gradient for step `version`; buffers are kept
  // between steps.
  std::vector<std::vector<float>> pending ABSL_GUARDED_BY(mu);
  std::vector<bool> has_pending ABSL_GUARDED_BY(mu);
  int pending_count ABSL_GUARDED_BY(mu) = 0;
  std::vector<float> merged ABSL_GUARDED_BY(mu);
  // When the pending step first had a push or a parked pull: how long it has stalled.
  absl::Time waiting_since ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();
  // When the pending step's first push arrived (for StoreObserver::OnSyncStepMerged).
  absl::Time first_push_at ABSL_GUARDED_BY(mu);
  // Each worker's last accepted push step (what tells an async retry), and the version
  // it last pulled (-1: none), from which an async push's staleness is counted.
  std::vector<int64_t> last_push_step ABSL_GUARDED_BY(mu);
  std::vector<int64_t> last_pull_version ABSL_GUARDED_BY(mu);
  ParkedPulls parked ABSL_GUARDED_BY(mu);
  // Pull compression (StoreConfig::pull_compression): the packed change to `version`.
  PackedChange packed ABSL_GUARDED_BY(mu);
  // SSP (MergeMode::kSsp): pushes ahead of `version`; empty in the other modes.
  AheadSteps ahead ABSL_GUARDED_BY(mu);
};

}  // namespace dtrain::kv
