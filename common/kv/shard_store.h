// A parameter server's shard: the keys it holds, their optimizer state, and the rule
// that merges workers' pushes (sync or async: a MergeRule, merge_rule.h). No gRPC here: the service translates
// RPCs into these calls, and the `local` kvstore uses the same class in-process.
//
// Thread-safe. Keys have their own locks, so pushes to different keys run in parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/kv/key_state.h"
#include "common/kv/optimizer.h"
#include "common/kv/step_lr.h"
#include "common/kv/step_ranks.h"
#include "common/kv/store_config.h"

namespace dtrain::kv {

// Called once a pull can be answered. `data` (numel floats, the weights at `version`)
// is only valid during the call, which runs with the key's lock held: copy out, do not
// call back into the store. On error `data` is null.
using PullCallback = std::function<void(const absl::Status& status, int64_t version, const float* data, int64_t numel)>;

// What PullDelta answers: the weights at `version` (numel floats at `data`) and, where
// the store could, the packed change that took them from `version - 1` to `version`
// (StoreConfig::pull_compression; delta_bytes at `delta`, packed by `delta_type`'s
// codec; null otherwise). Valid only during the call, as for PullCallback. On error
// `data` and `delta` are null.
struct PullAnswer {
  int64_t version = 0;
  const float* data = nullptr;
  int64_t numel = 0;
  const char* delta = nullptr;
  int64_t delta_bytes = 0;
  CompressionType delta_type = CompressionType::kNone;
};
using PullAnswerCallback = std::function<void(const absl::Status& status, const PullAnswer& answer)>;

// What the store reports as it works, for metrics (the server implements it over
// prometheus; the store stays free of it). Called with a key's lock held, from any
// thread: implementations must be cheap and must not call back into the store.
class StoreObserver {
 public:
  virtual ~StoreObserver() = default;
  // The optimizer ran once on one key; `took`: the merge of the step's pushes (sync) and
  // the update together, the server's own compute for that key and step.
  virtual void OnUpdateApplied(absl::Duration /*took*/) {}
  // Sync: one key's step merged, `wait` after the step's first push arrived: how long
  // the step waited for its slowest worker.
  virtual void OnSyncStepMerged(absl::Duration /*wait*/) {}
  // Async: a push was applied `staleness` updates after the version its worker last
  // pulled of that key (0: computed on the current weights).
  virtual void OnAsyncPushApplied(int64_t /*staleness*/) {}
  // SSP: a push taken for its step said its weights were `lag` versions behind it
  // (PushPullRequest.lag; 0: fresh); it counts StaleWeight(lag) in the step's mean.
  virtual void OnSspPushTaken(int64_t /*lag*/) {}
  // A worker was heard from for the first time.
  virtual void OnWorkerSeen(int /*worker_rank*/) {}
  // Pulls parked (`delta` > 0) or no longer parked (answered, timed out, dropped).
  virtual void OnParkedPulls(int64_t /*delta*/) {}
};

// What a pull asks for: the key's weights at `min_version` or later (every step's
// pull), or at exactly that version (a worker redoing a step).
enum class PullMode { kAtLeast, kExact };

// Server snapshots: gets a copy of one key's state each time its version
// reaches a multiple of the snapshot interval. Called with the key's lock held: keep
// it short, do not call back into the store.
using SnapshotSink = std::function<void(KeyState state)>;

class ShardStore {
 public:
  using Clock = std::function<absl::Time()>;

  explicit ShardStore(Clock clock = absl::Now);
  ~ShardStore();

  // Caps on what Configure and InitKey accept (store_config.h); set before Configure.
  void SetLimits(const StoreLimits& limits);

  // Sets mode, worker count, optimizer and pull compression (INVALID_ARGUMENT for pull
  // compression outside kSync, or 2bit). Repeating an identical config is OK (a
  // worker 0 that restarts); a different one is FAILED_PRECONDITION saying what differs.
  // num_workers over StoreLimits::max_workers is INVALID_ARGUMENT naming the cap and
  // its dtrain-server flag (--max-workers).
  absl::Status Configure(const StoreConfig& config);
  bool configured() const;

  // Creates a key. An existing key with the same shape is left unchanged (OK);
  // a different shape is FAILED_PRECONDITION. `state` may be empty (fresh start) or
  // hold StateSlots() * numel floats (resume), plus numel more with pull compression
  // (its residual); `version` is the resumed update count.
  // A shape has at most 32 dimensions.
  // RESOURCE_EXHAUSTED, naming the cap and its dtrain-server flag, when the key would
  // take the store over StoreLimits::max_keys (--max-keys) or max_bytes
  // (--max-shard-bytes; a key kept with its previous version counts its weights twice).
  absl::Status InitKey(uint64_t key, const std::vector<int64_t>& shape, const float* values, int64_t numel,
                       int64_t version = 0, const std::vector<float>& state = {});

  // A worker's gradient for `key`, computed on weights of version `step`.
  // Errors: FAILED_PRECONDITION before Configure; NOT_FOUND for an unknown key;
  // INVALID_ARGUMENT when numel differs from the key's (naming both and the shape) or
  // worker_rank is out of range. Sync: a push for an already-merged step, or a second
  // push for the pending step from the same worker, is ignored (OK) so that retries
  // count once; a push for a step ahead of the key's version is FAILED_PRECONDITION.
  // Async: a push whose step is <= that worker's last push to this key is ignored.
  // SSP: `lag` > 0 says the gradient was computed on weights that many versions older
  // than `step`; it is scaled by StaleWeight(lag) before it joins its step's mean
  // (stale_weight.h).
  // Any other lag, or one in another mode, is INVALID_ARGUMENT (CheckPushLag).
  absl::Status Push(int worker_rank, int64_t step, uint64_t key, const float* grad, int64_t numel, int64_t lag = 0);

  // kAtLeast: answers with the key's weights once its version >= min_version (sync;
  // async answers at once). `done` runs in this call if ready, else later from the
  // Push that completes the step, or from CheckDeadlines with DEADLINE_EXCEEDED naming
  // the workers whose pushes are missing ("step 812 key 3: waiting for worker 2, last
  // heard 31 s ago"), or from DropPulls(owner). NOT_FOUND for an unknown key, at once.
  // `owner` (0: none) tags a parked pull for DropPulls.
  //
  // kExact (sync only; a rejoining worker redoing step `min_version`, docs/recovery.md):
  // answers the weights of exactly version `min_version`: the current ones, or the
  // previous ones where StoreConfig::keep_previous_version keeps them; a version ahead
  // of the current one parks as above and is answered when it becomes current.
  // FAILED_PRECONDITION, at once, for an older version than held or an async store,
  // naming the key and the versions asked and held. `done`'s version is always that of
  // the data it gets.
  void Pull(int worker_rank, uint64_t key, int64_t min_version, absl::Time deadline, PullCallback done,
            uint64_t owner = 0, PullMode mode = PullMode::kAtLeast);

  // As Pull (kAtLeast), from a worker that holds the key's weights of `held_version`
  // exactly as this store had them (in dist_sync: the step it just pushed). When the
  // answer's version is held_version + 1 and the store packed that step's change
  // (StoreConfig::pull_compression; not after a restart or a Restore until the next
  // merge), the answer carries the packed change too, and the worker may take it
  // instead of the weights: adding its unpacked values to the held weights gives the
  // answer's weights bit for bit. held_version < 0: never.
  void PullDelta(int worker_rank, uint64_t key, int64_t min_version, int64_t held_version, absl::Time deadline,
                 PullAnswerCallback done, uint64_t owner = 0);

  // Fails (CANCELLED) and forgets every parked pull tagged `owner` (non-zero): the
  // stream that asked is gone, so nothing it left behind may stay. Returns how many.
  int64_t DropPulls(uint64_t owner);

  // Fails parked pulls whose deadline has passed, and logs one "still waiting" line per
  // stalled step every `still_waiting_every`. The service calls this about once a second.
  void CheckDeadlines(absl::Time now, absl::Duration still_waiting_every = absl::Seconds(10));

  // Recovery (docs/recovery.md, worker_fence.h): whether a request of `worker_rank`
  // from job `job_id`, incarnation `incarnation` may proceed. Call before its
  // Push/Pull. An incarnation newer than the rank's highest takes the rank: the older
  // one's parked pulls are failed FAILED_PRECONDITION "fenced: worker 1 incarnation 1
  // replaced by 2". Errors: FAILED_PRECONDITION for an older incarnation ("fenced: ...")
  // or another job (naming both ids); INVALID_ARGUMENT for a rank out of range or an
  // over-long job id. Empty job id and incarnation 0 (older clients), or a store not
  // configured yet (Push/Pull will say so), pass unchecked.
  absl::Status AdmitWorker(int worker_rank, absl::string_view job_id, uint64_t incarnation);
  // The job id adopted from the first worker that said one ("" until then), or SetJobId's.
  std::string job_id() const;
  // The highest incarnation admitted per worker rank (index = rank, 0: none); empty
  // before Configure.
  std::vector<uint64_t> WorkerIncarnations() const;
  // The job this server belongs to (dtrain-server --job-id, or the scheduler's), so a
  // worker of another job is refused even when it is the first to speak. Before or
  // after Configure. INVALID_ARGUMENT over kMaxJobIdBytes; FAILED_PRECONDITION naming
  // both when another id was already adopted. Empty: no-op.
  absl::Status SetJobId(absl::string_view job_id);

  // Each key's version and `worker_rank`'s last accepted push step of it (all keys,
  // ascending, when `keys` is empty; worker_rank < 0 or out of range: last_push_step
  // -1). NOT_FOUND names an unknown key. Not configured yet: no keys.
  absl::Status Versions(const std::vector<uint64_t>& keys, int worker_rank, std::vector<KeyVersion>* out) const;

  // Keys held (all when `keys` is empty); NOT_FOUND names an unknown key.
  absl::Status Snapshot(const std::vector<uint64_t>& keys, std::vector<KeyState>* out) const;
  // The keys held, ascending (lets GetState stream one key at a time instead of
  // copying the whole shard at once).
  std::vector<uint64_t> Keys() const;

  // Records that a worker was heard from (any message), for the "last heard" texts.
  void NoteHeardFrom(int worker_rank);

  // Set before the first Configure, which fixes it; `observer` (null: none) must
  // outlive the store.
  void SetObserver(StoreObserver* observer);

  // Elastic workers (docs/elastic.md): each step merges exactly the ranks `ranks` names
  // for it, summed in ascending rank order (with ranks 0..n-1 bit for bit as without),
  // and a push from a rank outside them is FAILED_PRECONDITION naming the generation.
  // Configure's num_workers is then the ranks' bound (--elastic's MAX); sync mode only
  // (Configure refuses another, INVALID_ARGUMENT). Set before the first Configure, which
  // fixes it; `ranks` must outlive the store.
  void SetStepRanks(const StepRanks* ranks);
  // Elastic workers: the update that merges step s runs the optimizer with its lr
  // times lr->LrFactorAt(s) (the weights bit for bit as without where that is 1.0).
  // Set before the first Configure, which fixes it; `lr` must outlive the store.
  void SetStepLr(const StepLr* lr);
  // Elastic workers, a dead worker's removal (docs/elastic.md): every key is at version
  // `step`, and the pushes pending for it are forgotten (each worker's push of that step
  // counts as not made: the survivors push it again in the new generation); the parked
  // pulls, which wait for a later version, fail with `why` (ABORTED "membership changed
  // from step S: ..."). FAILED_PRECONDITION, with nothing changed, before Configure or
  // when a key is at another version (naming it and its version). The caller keeps
  // pushes away meanwhile (elastic::MembershipGate::CommitDroppingStep).
  absl::Status DropPendingStep(int64_t step, const absl::Status& why);

  // Server snapshots (docs/recovery.md): in a sync store, each key whose
  // version reaches a multiple of `every` (> 0) hands a copy of its state to `sink`.
  // Set before the first Configure, which fixes it.
  void SetSnapshotHook(int64_t every, SnapshotSink sink);
  // The least version over the keys held (in sync mode the step the shard is at);
  // 0 with no keys.
  int64_t Step() const;
  // The version a push-pull of `step` answers with at the earliest: step + 1, or in
  // SSP step + 1 - staleness (never below 0). Unconfigured: step + 1.
  int64_t PullVersionAfterPush(int64_t step) const;
  // What Configure set; false before it.
  bool GetConfig(StoreConfig* out) const;
  // Rollback to a snapshot of step `step`: every key's weights, optimizer state and
  // version become `keys`' (which must name exactly the keys held, each at version
  // `step` with the key's element count and state size; else INVALID_ARGUMENT or
  // NOT_FOUND, and nothing changes). Pushes pending for the abandoned step are
  // forgotten and parked pulls fail ABORTED "rolled back to step S"; per-worker push
  // records restart, so the steps from `step` on are taken again.
  absl::Status Restore(const std::vector<KeyState>& keys, int64_t step);

  // The element count of `key`: what a compressed push of it must unpack to (the
  // exact packed size follows from it, common/kv/compression). FAILED_PRECONDITION
  // before Configure, NOT_FOUND for a key not held.
  absl::StatusOr<int64_t> ElementCount(uint64_t key) const;

  int64_t num_keys() const;
  // Pulls parked now, over all keys.
  int64_t parked_pulls() const;
  // Bytes of weights and optimizer state held (what StoreLimits::max_bytes caps); the
  // weights twice where StoreConfig::keep_previous_version keeps their previous version.
  int64_t bytes_held() const;
  int64_t updates_applied() const;
  // The time those updates took, the merges of sync steps included (not their waits).
  absl::Duration update_time() const;

 private:
  struct Impl;
  // Pull and PullDelta: `held_version` -1 for a plain pull.
  void PullImpl(int worker_rank, uint64_t key, int64_t min_version, int64_t held_version, absl::Time deadline,
                PullAnswerCallback done, uint64_t owner, PullMode mode);

  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain::kv
