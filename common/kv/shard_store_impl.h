// The shard store's private state (ShardStore::Impl) and the helpers that its parts
// share: shard_store.cc (setup, keys, pushes and pulls) and shard_store_rewind.cc
// (taking progress back: a rollback, a dropped step). Nothing else should include it.
#pragma once

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/kv/key_entry.h"
#include "common/kv/key_snapshots.h"
#include "common/kv/key_update.h"
#include "common/kv/shard_store.h"
#include "common/kv/store_setup.h"

namespace dtrain::kv {

struct ShardStore::Impl {
  explicit Impl(Clock c) : clock(std::move(c)) {}

  // The entries of `keys` (every key when empty), for Versions and Snapshot to read
  // under each key's own lock; NOT_FOUND names an unknown key.
  absl::Status Find(const std::vector<uint64_t>& keys, std::vector<std::pair<uint64_t, KeyEntry*>>* found) const
      ABSL_SHARED_LOCKS_REQUIRED(mu) {
    if (keys.empty()) {
      for (auto& [key, k] : this->keys) found->emplace_back(key, k.get());
    }
    for (uint64_t key : keys) {
      auto it = this->keys.find(key);
      if (it == this->keys.end()) {
        return absl::NotFoundError(absl::StrCat("key ", key, " is not held by this server"));
      }
      found->emplace_back(key, it->second.get());
    }
    return absl::OkStatus();
  }

  const Clock clock;
  mutable absl::Mutex mu;
  std::unique_ptr<const StoreSetup> setup ABSL_GUARDED_BY(mu);             // null until Configure; then never changes
  std::map<uint64_t, std::unique_ptr<KeyEntry>> keys ABSL_GUARDED_BY(mu);  // never removed
  StoreObserver* observer ABSL_GUARDED_BY(mu) = nullptr;                   // what the next Configure uses
  SnapshotHook snapshots ABSL_GUARDED_BY(mu);                              // likewise
  const StepRanks* step_ranks ABSL_GUARDED_BY(mu) = nullptr;               // likewise
  const StepLr* step_lr ABSL_GUARDED_BY(mu) = nullptr;                     // likewise
  StoreLimits limits ABSL_GUARDED_BY(mu);
  std::string job_id ABSL_GUARDED_BY(mu);      // SetJobId before Configure: the fence starts with it
  int64_t bytes_held ABSL_GUARDED_BY(mu) = 0;  // weights + optimizer state of every key
  std::atomic<int64_t> parked_pulls{0};
  absl::Time last_still_waiting_log ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  std::atomic<int64_t> updates_applied{0};
  std::atomic<int64_t> update_nanos{0};  // summed over updates_applied: merge + optimizer
  // SSP: the configured staleness; -1 in the other modes or before Configure.
  std::atomic<int> ssp_staleness{-1};

  // The key, plus the setup Push/Pull need (immutable once configured, so it is
  // read without `mu` from here on).
  absl::Status Find(uint64_t key, KeyEntry** out, const StoreSetup** out_setup) const {
    absl::ReaderMutexLock lock(&mu);
    if (setup == nullptr) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
    auto it = keys.find(key);
    if (it == keys.end()) return absl::NotFoundError(absl::StrCat("key ", key, " is not held by this server"));
    *out = it->second.get();
    *out_setup = setup.get();
    return absl::OkStatus();
  }

  static absl::Status CheckWorker(const StoreSetup& s, int worker_rank) {
    if (worker_rank < 0 || worker_rank >= s.config.num_workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker_rank ", worker_rank, " out of range [0, ", s.config.num_workers, ")"));
    }
    return absl::OkStatus();
  }

  // Counts parked pulls added (> 0) or removed (< 0), for parked_pulls() and metrics.
  void CountParked(const StoreSetup* s, int64_t delta) {
    if (delta == 0) return;
    parked_pulls.fetch_add(delta, std::memory_order_relaxed);
    if (s != nullptr && s->observer != nullptr) s->observer->OnParkedPulls(delta);
  }

  // Answers parked pulls the key's version now satisfies.
  void FireReady(const StoreSetup& s, uint64_t key, KeyEntry& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    const int64_t answered = k.parked.TakeReady(k.version, [&](const ParkedPull& p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (p.mode == PullMode::kExact) {
        // Versions move one merge at a time and each merge fires, so this is the
        // current version; answered through the same check regardless.
        AnswerExact(key, k, p.worker_rank, p.min_version, p.done);
        return;
      }
      p.done(absl::OkStatus(), AnswerOf(s, k, p.held_version));
    });
    CountParked(&s, -answered);
  }

  // An exact pull of `version`, held or older than held: answers the weights of that
  // version, or FAILED_PRECONDITION naming what is held.
  static void AnswerExact(uint64_t key, KeyEntry& k, int worker_rank, int64_t version, const PullAnswerCallback& done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    const float* data = nullptr;
    if (!k.WeightsAt(version, &data)) {
      done(absl::FailedPreconditionError(absl::StrCat("exact pull of key ", key, " version ", version, " by worker ",
                                                      worker_rank, ": ", k.previous.HeldText(k.version))),
           PullAnswer{k.version});
      return;
    }
    k.last_pull_version[worker_rank] = version;
    done(absl::OkStatus(), PullAnswer{version, data, k.numel});
  }

  // The answer to a pull of the current weights by a worker holding `held_version`
  // (-1: unknown): with the packed change from it when there is one.
  static PullAnswer AnswerOf(const StoreSetup& s, const KeyEntry& k, int64_t held_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    PullAnswer a{k.version, k.values.data(), k.numel};
    if (s.pull_codec != nullptr) k.packed.Offer(*s.pull_codec, held_version, k.version, &a);
    return a;
  }

  // `started`: when the work for this update began (the merge, for a sync step), so that
  // the time reported is what the server computed, not what it waited for.
  void Apply(const StoreSetup& s, KeyEntry& k, const float* grad, absl::Time started)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    UpdateKey(s, k, grad);
    const absl::Duration took = absl::Now() - started;
    updates_applied.fetch_add(1, std::memory_order_relaxed);
    update_nanos.fetch_add(absl::ToInt64Nanoseconds(took), std::memory_order_relaxed);
    if (s.observer != nullptr) s.observer->OnUpdateApplied(took);
  }

  // A sync step's last push arrived (`last_rank`, `last_grad`; -1: none, SSP's pushes
  // held ahead): the mean of every worker's is applied once.
  void MergeStep(const StoreSetup& s, KeyEntry& k, int last_rank, const float* last_grad)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    if (s.observer != nullptr) s.observer->OnSyncStepMerged(clock() - k.first_push_at);
    const absl::Time started = absl::Now();
    Apply(s, k, MeanGradient(s, k, last_rank, last_grad), started);
    ResetPending(k);
  }

  // SSP: a step just merged; if pushes for the next step were held ahead, they become
  // its pending pushes, and if every worker's is there that step merges too (and so on).
  void PromoteAhead(const StoreSetup& s, uint64_t key, KeyEntry& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    while (k.ahead.TakeStep(k.version, [&k](int w, std::vector<float>& grad) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      k.SeeWorker(w);
      k.pending[w].swap(grad);
      k.has_pending[w] = true;
      ++k.pending_count;
    })) {
      k.first_push_at = clock();
      if (k.pending_count < s.config.num_workers) return;
      MergeStep(s, k, /*last_rank=*/-1, nullptr);
      MaybeSnapshot(s, key, k);
    }
  }

  // Fails (with `why(key)`) and forgets every parked pull `match` selects. Returns how many.
  template <typename Match, typename Why>
  int64_t DropParked(Match match, Why why) {
    if (parked_pulls.load(std::memory_order_relaxed) == 0) return 0;
    const StoreSetup* s = nullptr;
    std::vector<std::pair<uint64_t, KeyEntry*>> all;
    {
      absl::ReaderMutexLock lock(&mu);
      s = setup.get();
      all.reserve(keys.size());
      for (auto& [key, k] : keys) all.emplace_back(key, k.get());
    }
    int64_t dropped = 0;
    for (auto& [key, k] : all) {
      absl::MutexLock lock(&k->mu);
      if (k->parked.empty()) continue;
      const int64_t n = k->parked.Drop(match, why(key), k->version);
      CountParked(s, -n);
      dropped += n;
    }
    return dropped;
  }

  // A key just reached a snapshot step: its copy goes out while the lock still holds
  // that version (the next merge cannot start before we return).
  static void MaybeSnapshot(const StoreSetup& s, uint64_t key, const KeyEntry& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    s.snapshots.AtVersion(k.version, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return KeyState{key, k.shape, k.version, k.values, k.state};
    });
  }

  void ResetPending(KeyEntry& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    std::fill(k.has_pending.begin(), k.has_pending.end(), false);
    k.pending_count = 0;
    k.waiting_since = k.parked.empty() ? absl::InfiniteFuture() : clock();
  }
};

}  // namespace dtrain::kv
