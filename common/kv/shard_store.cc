#include "common/kv/shard_store.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/kv/key_entry.h"
#include "common/kv/key_snapshots.h"
#include "common/kv/merge_rule.h"
#include "common/kv/store_config.h"
#include "common/kv/vector_ops.h"
#include "common/kv/worker_fence.h"
#include "common/kvstore_mode.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::kv {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

constexpr size_t kMaxDims = 32;

// The element count of `shape`, or -1 if a dimension is negative or the product
// does not fit in an int64 (shapes come from the wire).
int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

// What Configure sets, once. Immutable afterwards, so whoever got it from Find reads
// it without a lock.
struct Setup {
  StoreConfig config;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<MergeRule> rule;
  StoreObserver* observer = nullptr;  // null: none
  // Per worker, unix nanos of the last message; 0 = never. The array is fixed; its
  // elements are written without a lock.
  std::unique_ptr<std::atomic<int64_t>[]> last_heard;
  // Job id and per-rank incarnations (docs/recovery.md); thread-safe on its own.
  std::unique_ptr<WorkerFence> fence;
  // Keys keep their previous version's weights (sync with keep_previous_version).
  bool keep_previous = false;
  // Pull compression (StoreConfig::pull_compression; null: none), and the state floats
  // per element: the optimizer's slots, then the pull residual's one.
  std::unique_ptr<GradientCodec> pull_codec;
  int64_t optimizer_slots = 0;
  int64_t state_slots = 0;
  // Server snapshots (sync only; none in the other modes).
  SnapshotHook snapshots;
};

}  // namespace

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
  std::unique_ptr<const Setup> setup ABSL_GUARDED_BY(mu);  // null until Configure; then never changes
  std::map<uint64_t, std::unique_ptr<KeyEntry>> keys ABSL_GUARDED_BY(mu);  // never removed
  StoreObserver* observer ABSL_GUARDED_BY(mu) = nullptr;  // what the next Configure uses
  int64_t snapshot_every ABSL_GUARDED_BY(mu) = 0;          // likewise
  SnapshotSink snapshot_sink ABSL_GUARDED_BY(mu);
  StoreLimits limits ABSL_GUARDED_BY(mu);
  std::string job_id ABSL_GUARDED_BY(mu);  // SetJobId before Configure: the fence starts with it
  int64_t bytes_held ABSL_GUARDED_BY(mu) = 0;  // weights + optimizer state of every key
  std::atomic<int64_t> parked_pulls{0};
  absl::Time last_still_waiting_log ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  std::atomic<int64_t> updates_applied{0};
  // SSP: the configured staleness; -1 in the other modes or before Configure.
  std::atomic<int> ssp_staleness{-1};

  // The key, plus the setup Push/Pull need (immutable once configured, so it is
  // read without `mu` from here on).
  absl::Status Find(uint64_t key, KeyEntry** out, const Setup** out_setup) const {
    absl::ReaderMutexLock lock(&mu);
    if (setup == nullptr) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
    auto it = keys.find(key);
    if (it == keys.end()) return absl::NotFoundError(absl::StrCat("key ", key, " is not held by this server"));
    *out = it->second.get();
    *out_setup = setup.get();
    return absl::OkStatus();
  }

  static absl::Status CheckWorker(const Setup& s, int worker_rank) {
    if (worker_rank < 0 || worker_rank >= s.config.num_workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker_rank ", worker_rank, " out of range [0, ", s.config.num_workers, ")"));
    }
    return absl::OkStatus();
  }

  // "worker 2 (last heard 31 s ago)" or "worker 2 (never heard from)".
  static std::string WorkerText(const Setup& s, int w, absl::Time now) {
    const int64_t ns = s.last_heard[w].load(std::memory_order_relaxed);
    if (ns == 0) return absl::StrCat("worker ", w, " (never heard from)");
    return absl::StrCat("worker ", w, " (last heard ", absl::ToInt64Seconds(now - absl::FromUnixNanos(ns)),
                        " s ago)");
  }

  // Counts parked pulls added (> 0) or removed (< 0), for parked_pulls() and metrics.
  void CountParked(const Setup* s, int64_t delta) {
    if (delta == 0) return;
    parked_pulls.fetch_add(delta, std::memory_order_relaxed);
    if (s != nullptr && s->observer != nullptr) s->observer->OnParkedPulls(delta);
  }

  // Answers parked pulls the key's version now satisfies.
  void FireReady(const Setup& s, uint64_t key, KeyEntry& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
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
  static void AnswerExact(uint64_t key, KeyEntry& k, int worker_rank, int64_t version,
                          const PullAnswerCallback& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
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
  static PullAnswer AnswerOf(const Setup& s, const KeyEntry& k, int64_t held_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    PullAnswer a{k.version, k.values.data(), k.numel};
    if (s.pull_codec != nullptr) k.packed.Offer(*s.pull_codec, held_version, k.version, &a);
    return a;
  }

  // Pull compression: the optimizer's new weights go to a spare buffer, and the weights
  // move by exactly what their packed change unpacks to (packed_change.h).
  void ApplyPacked(const Setup& s, KeyEntry& k, const float* grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    const int64_t n = k.numel;
    float* next = k.previous.kept() ? k.previous.spare() : k.packed.Spare(n);
    const float* current = k.values.data();
    s.optimizer->UpdateInto(k.version, current, next, grad, k.state.data(), n);
    float* residual = k.state.data() + s.optimizer_slots * n;
    k.packed.Pack(*s.pull_codec, current, next, residual, n, k.version + 1);
    if (k.previous.kept()) {
      k.previous.Advance(&k.values, k.version);
    } else {
      k.packed.TakeSpare(&k.values);
    }
  }

  void Apply(const Setup& s, KeyEntry& k, const float* grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    if (s.pull_codec != nullptr) {
      ApplyPacked(s, k, grad);
    } else if (k.previous.kept()) {
      // Into the spare buffer, then swap: the old weights become the previous version
      // (what this step was computed from, for a worker that must redo it) with no
      // copy and no allocation, and the same memory traffic as an update in place.
      s.optimizer->UpdateInto(k.version, k.values.data(), k.previous.spare(), grad, k.state.data(), k.numel);
      k.previous.Advance(&k.values, k.version);
    } else {
      s.optimizer->Update(k.version, k.values.data(), grad, k.state.data(), k.numel);
    }
    ++k.version;
    updates_applied.fetch_add(1, std::memory_order_relaxed);
    if (s.observer != nullptr) s.observer->OnUpdateApplied();
  }

  // Sums the step's gradients in rank order (bit-reproducible whatever the arrival
  // order), averages, applies once. The last push to arrive (`last_rank`, `last_grad`)
  // is read in place rather than stored: with one worker nothing is copied.
  void MergeStep(const Setup& s, KeyEntry& k, int last_rank, const float* last_grad)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    const int n = s.config.num_workers;
    if (s.observer != nullptr) s.observer->OnSyncStepMerged(clock() - k.first_push_at);
    auto grad_of = [&](int w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
      return w == last_rank ? last_grad : k.pending[w].data();
    };
    if (n == 1) {
      Apply(s, k, grad_of(0));
      ResetPending(k);
      return;
    }
    k.merged.assign(grad_of(0), grad_of(0) + k.numel);
    float* acc = k.merged.data();
    for (int w = 1; w < n; ++w) AddInto(acc, grad_of(w), k.numel);
    DivideBy(acc, k.numel, static_cast<float>(n));
    Apply(s, k, acc);
    ResetPending(k);
  }

  // SSP: a step just merged; if pushes for the next step were held ahead, they become
  // its pending pushes, and if every worker's is there that step merges too (and so on).
  void PromoteAhead(const Setup& s, uint64_t key, KeyEntry& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
    while (!k.ahead.empty() && k.ahead.begin()->first == k.version) {
      KeyEntry::AheadStep next = std::move(k.ahead.begin()->second);
      k.ahead.erase(k.ahead.begin());
      for (size_t w = 0; w < next.has.size(); ++w) {
        if (!next.has[w]) continue;
        k.SeeWorker(static_cast<int>(w));
        k.pending[w].swap(next.grads[w]);
        k.has_pending[w] = true;
        ++k.pending_count;
      }
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
    const Setup* s = nullptr;
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
  static void MaybeSnapshot(const Setup& s, uint64_t key, const KeyEntry& k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
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

ShardStore::ShardStore(Clock clock) : impl_(std::make_unique<Impl>(std::move(clock))) {}

// Nobody else may use a store being destroyed, so its locks protect nothing here.
ShardStore::~ShardStore() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Nobody may be left waiting on a pull that can no longer be answered.
  for (auto& [key, k] : impl_->keys) {
    absl::MutexLock lock(&k->mu);
    const int64_t failed = k->parked.FailAll(
        absl::CancelledError(absl::StrCat("key ", key, ": parameter server shutting down")), k->version);
    impl_->CountParked(impl_->setup.get(), -failed);
  }
}

absl::Status ShardStore::Configure(const StoreConfig& config) {
  absl::MutexLock lock(&impl_->mu);
  if (impl_->setup != nullptr) {
    const std::string diff = DescribeConfigDiff(impl_->setup->config, config);
    if (diff.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("shard store already configured differently (current vs requested): ", diff));
  }
  if (config.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers must be >= 1, got ", config.num_workers));
  }
  if (config.staleness < 0 || config.staleness > kMaxStaleness ||
      (config.staleness != 0 && config.mode != MergeMode::kSsp)) {
    return absl::InvalidArgumentError(absl::StrCat("staleness ", config.staleness, " (want 0..", kMaxStaleness,
                                                   ", and only with dist_ssp)"));
  }
  if (config.num_workers > impl_->limits.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers ", config.num_workers,
                                                   " is over this server's cap of ", impl_->limits.max_workers,
                                                   " workers (--max-workers)"));
  }
  if (config.pull_compression != CompressionType::kNone) {
    if (absl::Status s = ValidateSpec({config.pull_compression, 1.0f}); !s.ok()) return s;
    if (config.mode != MergeMode::kSync || config.pull_compression == CompressionType::kTwoBit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pull compression ", CompressionTypeName(config.pull_compression), " with mode ", ModeName(config.mode),
          ": pulls are compressed in dist_sync only (a packed change is from the step a worker pushed), and "
          "with fp16, int8 or 1bit (2bit's fixed quantum does not fit weight changes)"));
    }
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config.optimizer);
  if (!opt.ok()) return opt.status();
  auto setup = std::make_unique<Setup>();
  setup->config = config;
  setup->optimizer = *std::move(opt);
  setup->pull_codec = MakeCodec({config.pull_compression, 1.0f});
  setup->optimizer_slots = setup->optimizer->StateSlots();
  setup->state_slots = setup->optimizer_slots + (setup->pull_codec != nullptr ? 1 : 0);
  setup->rule = CreateMergeRule(config);
  setup->observer = impl_->observer;
  setup->last_heard = std::make_unique<std::atomic<int64_t>[]>(config.num_workers);
  for (int w = 0; w < config.num_workers; ++w) setup->last_heard[w].store(0);
  setup->fence = std::make_unique<WorkerFence>(config.num_workers);
  setup->keep_previous = config.mode == MergeMode::kSync && config.keep_previous_version;
  if (config.mode == MergeMode::kSsp) impl_->ssp_staleness.store(config.staleness, std::memory_order_release);
  if (config.mode == MergeMode::kSync && impl_->snapshot_sink) {
    setup->snapshots = SnapshotHook(impl_->snapshot_every, impl_->snapshot_sink);
  }
  if (absl::Status s = setup->fence->SetJobId(impl_->job_id); !s.ok()) return s;
  impl_->setup = std::move(setup);
  return absl::OkStatus();
}

bool ShardStore::configured() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return impl_->setup != nullptr;
}

absl::Status ShardStore::InitKey(uint64_t key, const std::vector<int64_t>& shape, const float* values,
                                 int64_t numel, int64_t version, const std::vector<float>& state) {
  absl::MutexLock lock(&impl_->mu);
  const Setup* setup = impl_->setup.get();
  if (setup == nullptr) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
  // A shape is kept with the key and is not counted in max_bytes: its length is capped.
  if (shape.size() > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", key, ": shape has ", shape.size(), " dimensions, more than ", kMaxDims));
  }
  if (NumElements(shape) != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", key, ": shape ", ShapeText(shape), " does not hold ", numel, " elements"));
  }
  if (numel > 0 && values == nullptr) return absl::InvalidArgumentError(absl::StrCat("key ", key, ": no values"));
  if (version < 0) return absl::InvalidArgumentError(absl::StrCat("key ", key, ": negative version ", version));
  const int64_t state_size = setup->state_slots * numel;
  if (!state.empty() && static_cast<int64_t>(state.size()) != state_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key ", key, ": optimizer state has ", state.size(), " floats, want ", state_size, " (",
        setup->config.optimizer.name, " state for ", numel, " elements",
        setup->pull_codec != nullptr ? ", plus the pull compression's residual" : "",
        "; was the checkpoint written with another --optimizer, --momentum or --pull-gc-type?)"));
  }
  auto it = impl_->keys.find(key);
  if (it != impl_->keys.end()) {
    if (it->second->shape == shape) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("key ", key, " already exists with shape ",
                                                      ShapeText(it->second->shape), ", not ", ShapeText(shape)));
  }
  const StoreLimits& limits = impl_->limits;
  if (static_cast<int64_t>(impl_->keys.size()) >= limits.max_keys) {
    return absl::ResourceExhaustedError(absl::StrCat("key ", key, ": this server already holds ", impl_->keys.size(),
                                                     " keys, its cap (--max-keys ", limits.max_keys, ")"));
  }
  // numel and state_size are bounded by the bytes that came with the request.
  const bool keep_previous = setup->keep_previous;
  // Pull compression adds the packed change, and a spare buffer where no previous
  // version is kept.
  const int64_t packed_bytes = setup->pull_codec != nullptr ? setup->pull_codec->PackedBytes(numel) : 0;
  const int64_t spare = setup->pull_codec != nullptr && !keep_previous ? numel : 0;
  const int64_t bytes =
      ((keep_previous ? 2 : 1) * numel + spare + state_size) * static_cast<int64_t>(sizeof(float)) + packed_bytes;
  if (bytes > limits.max_bytes - impl_->bytes_held) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "key ", key, ": its ", bytes, " bytes of weights",
        keep_previous ? " (twice: the previous version is kept too)" : "",
        " and optimizer state would take this server to ", impl_->bytes_held + bytes, " bytes, over its cap of ",
        limits.max_bytes, " (--max-shard-bytes)"));
  }
  impl_->bytes_held += bytes;
  impl_->keys.emplace(key, std::make_unique<KeyEntry>(
                               shape, version, std::vector<float>(values, values + numel),
                               state.empty() ? std::vector<float>(state_size, 0.0f) : state,
                               setup->config.num_workers, keep_previous));
  return absl::OkStatus();
}

absl::Status ShardStore::Push(int worker_rank, int64_t step, uint64_t key, const float* grad, int64_t numel) {
  KeyEntry* k = nullptr;
  const Setup* setup = nullptr;
  if (absl::Status s = impl_->Find(key, &k, &setup); !s.ok()) return s;
  if (absl::Status s = Impl::CheckWorker(*setup, worker_rank); !s.ok()) return s;
  NoteHeardFrom(worker_rank);
  if (numel != k->numel) {
    return absl::InvalidArgumentError(absl::StrCat("push of key ", key, " by worker ", worker_rank, " has ", numel,
                                                   " elements, but the key has ", k->numel, " (shape ",
                                                   ShapeText(k->shape), ")"));
  }
  absl::MutexLock lock(&k->mu);
  k->SeeWorker(worker_rank);
  const absl::StatusOr<PushAction> action =
      setup->rule->OnPush(k->Progress(key, worker_rank, step), worker_rank, step);
  if (!action.ok()) return action.status();
  if (*action == PushAction::kIgnore) return absl::OkStatus();
  k->last_push_step[worker_rank] = std::max(k->last_push_step[worker_rank], step);
  if (*action == PushAction::kStoreAhead) {
    KeyEntry::AheadStep& a = k->ahead[step];
    if (a.has.size() <= static_cast<size_t>(worker_rank)) {
      a.grads.resize(worker_rank + 1);
      a.has.resize(worker_rank + 1, false);
    }
    a.grads[worker_rank].assign(grad, grad + numel);
    a.has[worker_rank] = true;
    ++a.count;
    return absl::OkStatus();
  }
  if (*action == PushAction::kApplyNow) {
    if (setup->observer != nullptr && k->last_pull_version[worker_rank] >= 0) {
      setup->observer->OnAsyncPushApplied(k->version - k->last_pull_version[worker_rank]);
    }
    impl_->Apply(*setup, *k, grad);
    Impl::MaybeSnapshot(*setup, key, *k);
    impl_->FireReady(*setup, key, *k);
    return absl::OkStatus();
  }
  // A step merged from every worker's push: kStorePending until the last, kMergeStep.
  if (k->pending_count == 0) {
    k->first_push_at = impl_->clock();
    if (k->parked.empty()) k->waiting_since = k->first_push_at;
  }
  if (*action == PushAction::kMergeStep) {
    impl_->MergeStep(*setup, *k, worker_rank, grad);
    Impl::MaybeSnapshot(*setup, key, *k);
    impl_->PromoteAhead(*setup, key, *k);
    impl_->FireReady(*setup, key, *k);
    return absl::OkStatus();
  }
  k->pending[worker_rank].assign(grad, grad + numel);
  k->has_pending[worker_rank] = true;
  ++k->pending_count;
  return absl::OkStatus();
}

void ShardStore::Pull(int worker_rank, uint64_t key, int64_t min_version, absl::Time deadline, PullCallback done,
                      uint64_t owner, PullMode mode) {
  PullImpl(
      worker_rank, key, min_version, /*held_version=*/-1, deadline,
      [done = std::move(done)](const absl::Status& s, const PullAnswer& a) { done(s, a.version, a.data, a.numel); },
      owner, mode);
}

void ShardStore::PullDelta(int worker_rank, uint64_t key, int64_t min_version, int64_t held_version,
                           absl::Time deadline, PullAnswerCallback done, uint64_t owner) {
  PullImpl(worker_rank, key, min_version, held_version, deadline, std::move(done), owner, PullMode::kAtLeast);
}

void ShardStore::PullImpl(int worker_rank, uint64_t key, int64_t min_version, int64_t held_version,
                          absl::Time deadline, PullAnswerCallback done, uint64_t owner, PullMode mode) {
  KeyEntry* k = nullptr;
  const Setup* setup = nullptr;
  absl::Status s = impl_->Find(key, &k, &setup);
  if (s.ok()) s = Impl::CheckWorker(*setup, worker_rank);
  if (s.ok() && mode == PullMode::kExact && setup->config.mode != MergeMode::kSync) {
    // Async versions count single pushes, not steps: nobody can redo "version v".
    s = absl::FailedPreconditionError(absl::StrCat("exact pull of key ", key, " version ", min_version,
                                                   " by worker ", worker_rank,
                                                   ": exact pulls are for dist_sync; this server runs async"));
  }
  if (!s.ok()) {
    done(s, PullAnswer{});
    return;
  }
  NoteHeardFrom(worker_rank);
  absl::MutexLock lock(&k->mu);
  k->SeeWorker(worker_rank);
  if (mode == PullMode::kExact && min_version <= k->version) {
    Impl::AnswerExact(key, *k, worker_rank, min_version, done);
    return;
  }
  if (mode == PullMode::kAtLeast && setup->rule->CanAnswerPull(k->Progress(key, worker_rank), min_version)) {
    k->last_pull_version[worker_rank] = k->version;
    done(absl::OkStatus(), Impl::AnswerOf(*setup, *k, held_version));
    return;
  }
  if (k->pending_count == 0 && k->parked.empty()) k->waiting_since = impl_->clock();
  k->parked.Park({worker_rank, min_version, impl_->clock(), deadline, std::move(done), owner, mode, held_version});
  impl_->CountParked(setup, 1);
}

int64_t ShardStore::DropPulls(uint64_t owner) {
  if (owner == 0) return 0;
  return impl_->DropParked([owner](const ParkedPull& p) { return p.owner == owner; },
                           [](uint64_t key) {
                             return absl::CancelledError(absl::StrCat("key ", key, ": the stream that asked is gone"));
                           });
}

absl::Status ShardStore::AdmitWorker(int worker_rank, absl::string_view job_id, uint64_t incarnation) {
  if (job_id.empty() && incarnation == 0) return absl::OkStatus();
  const Setup* setup = nullptr;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    setup = impl_->setup.get();
  }
  if (setup == nullptr) return absl::OkStatus();
  const absl::StatusOr<WorkerFence::Admission> a = setup->fence->Admit(worker_rank, job_id, incarnation);
  if (!a.ok()) return a.status();
  if (!a->raised || a->replaced == 0) return absl::OkStatus();
  // The old incarnation's parked pulls would answer a process that no longer owns
  // the rank (and keep waiting on its stream); the replacement asks again.
  const std::string why =
      absl::StrCat("fenced: worker ", worker_rank, " incarnation ", a->replaced, " replaced by ", incarnation);
  const int64_t dropped = impl_->DropParked([worker_rank](const ParkedPull& p) { return p.worker_rank == worker_rank; },
                                            [&why](uint64_t key) {
                                              return absl::FailedPreconditionError(
                                                  absl::StrCat(why, " (pull of key ", key, ")"));
                                            });
  DTRAIN_LOG(INFO) << "worker " << worker_rank << " incarnation " << incarnation << " replaced incarnation "
                   << a->replaced << (dropped > 0 ? absl::StrCat("; failed its ", dropped, " parked pulls") : "");
  return absl::OkStatus();
}

absl::Status ShardStore::SetJobId(absl::string_view job_id) {
  absl::MutexLock lock(&impl_->mu);
  if (impl_->setup != nullptr) return impl_->setup->fence->SetJobId(job_id);
  // Not configured yet: the fence's own rules, then Configure hands the id to the fence it makes.
  WorkerFence check(1);
  absl::Status s = check.SetJobId(impl_->job_id);
  if (s.ok()) s = check.SetJobId(job_id);
  if (s.ok()) impl_->job_id = check.job_id();
  return s;
}

std::string ShardStore::job_id() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return impl_->setup == nullptr ? impl_->job_id : impl_->setup->fence->job_id();
}

std::vector<uint64_t> ShardStore::WorkerIncarnations() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  std::vector<uint64_t> out;
  if (impl_->setup == nullptr) return out;
  for (int r = 0; r < impl_->setup->config.num_workers; ++r) out.push_back(impl_->setup->fence->incarnation(r));
  return out;
}

absl::Status ShardStore::Versions(const std::vector<uint64_t>& keys, int worker_rank,
                                  std::vector<KeyVersion>* out) const {
  std::vector<std::pair<uint64_t, KeyEntry*>> found;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    if (impl_->setup == nullptr) {
      out->clear();
      return absl::OkStatus();
    }
    DTRAIN_RETURN_IF_ERROR(impl_->Find(keys, &found));
  }
  out->clear();
  out->reserve(found.size());
  for (auto& [key, k] : found) {
    absl::MutexLock lock(&k->mu);
    KeyVersion v;
    v.key = key;
    v.version = k->version;
    if (worker_rank >= 0 && worker_rank < static_cast<int>(k->last_push_step.size())) {
      v.last_push_step = k->last_push_step[worker_rank];
    }
    out->push_back(v);
  }
  return absl::OkStatus();
}

void ShardStore::CheckDeadlines(absl::Time now, absl::Duration still_waiting_every) {
  const Setup* setup = nullptr;
  std::vector<std::pair<uint64_t, KeyEntry*>> keys;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    setup = impl_->setup.get();
    if (setup == nullptr) return;
    keys.reserve(impl_->keys.size());
    for (auto& [key, k] : impl_->keys) keys.emplace_back(key, k.get());
  }
  // Stalled keys grouped by step, for one "still waiting" line per step.
  struct Stall {
    uint64_t first_key;
    int64_t num_keys = 0;
    std::vector<bool> missing;
  };
  std::map<int64_t, Stall> stalls;
  for (auto& [key, k] : keys) {
    absl::MutexLock lock(&k->mu);
    if (k->parked.empty() && k->pending_count == 0) continue;
    const std::vector<int> missing = k->Missing();
    const int64_t expired = k->parked.Expire(now, k->version, key, [&] {
      std::vector<std::string> names;
      for (int w : missing) names.push_back(Impl::WorkerText(*setup, w, now));
      return absl::StrJoin(names, ", ");
    });
    impl_->CountParked(setup, -expired);
    if (k->parked.empty() && k->pending_count == 0) {
      k->waiting_since = absl::InfiniteFuture();  // its waiters gave up: nothing stalls now
      continue;
    }
    if (now - k->waiting_since < still_waiting_every) continue;
    Stall& st = stalls[k->version];
    if (st.num_keys++ == 0) {
      st.first_key = key;
      st.missing.assign(setup->config.num_workers, false);
    }
    for (int w : missing) st.missing[w] = true;
  }
  {
    absl::MutexLock lock(&impl_->mu);
    if (stalls.empty() || now - impl_->last_still_waiting_log < still_waiting_every) return;
    impl_->last_still_waiting_log = now;
  }
  for (const auto& [step, st] : stalls) {
    std::vector<std::string> names;
    for (int w = 0; w < static_cast<int>(st.missing.size()); ++w) {
      if (st.missing[w]) names.push_back(Impl::WorkerText(*setup, w, now));
    }
    DTRAIN_LOG(WARNING) << "step " << step << " key " << st.first_key
                        << (st.num_keys > 1 ? absl::StrCat(" (+", st.num_keys - 1, " more keys)") : "")
                        << ": still waiting for " << absl::StrJoin(names, ", ");
  }
}

absl::Status ShardStore::Snapshot(const std::vector<uint64_t>& keys, std::vector<KeyState>* out) const {
  std::vector<std::pair<uint64_t, KeyEntry*>> found;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    DTRAIN_RETURN_IF_ERROR(impl_->Find(keys, &found));
  }
  out->clear();
  out->reserve(found.size());
  for (auto& [key, k] : found) {
    absl::MutexLock lock(&k->mu);
    out->push_back({key, k->shape, k->version, k->values, k->state});
  }
  return absl::OkStatus();
}

std::vector<uint64_t> ShardStore::Keys() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  std::vector<uint64_t> keys;
  keys.reserve(impl_->keys.size());
  for (const auto& entry : impl_->keys) keys.push_back(entry.first);
  return keys;
}

void ShardStore::NoteHeardFrom(int worker_rank) {
  absl::ReaderMutexLock lock(&impl_->mu);
  const Setup* setup = impl_->setup.get();
  if (setup == nullptr || worker_rank < 0 || worker_rank >= setup->config.num_workers) return;
  const int64_t before =
      setup->last_heard[worker_rank].exchange(absl::ToUnixNanos(impl_->clock()), std::memory_order_relaxed);
  if (before == 0 && setup->observer != nullptr) setup->observer->OnWorkerSeen(worker_rank);
}

void ShardStore::SetObserver(StoreObserver* observer) {
  absl::MutexLock lock(&impl_->mu);
  impl_->observer = observer;
}

void ShardStore::SetSnapshotHook(int64_t every, SnapshotSink sink) {
  absl::MutexLock lock(&impl_->mu);
  impl_->snapshot_every = every;
  impl_->snapshot_sink = std::move(sink);
}

int64_t ShardStore::Step() const {
  std::vector<KeyVersion> versions;
  if (!Versions({}, -1, &versions).ok() || versions.empty()) return 0;
  int64_t step = versions[0].version;
  for (const KeyVersion& v : versions) step = std::min(step, v.version);
  return step;
}

int64_t ShardStore::PullVersionAfterPush(int64_t step) const {
  // Read on every push-pull: an atomic set once by Configure, not the store's lock.
  const int staleness = impl_->ssp_staleness.load(std::memory_order_acquire);
  return ::dtrain::PullVersionAfterPush(staleness < 0 ? KVStoreMode::kDistSync : KVStoreMode::kDistSsp, step,
                              std::max(staleness, 0));
}

bool ShardStore::GetConfig(StoreConfig* out) const {
  absl::ReaderMutexLock lock(&impl_->mu);
  if (impl_->setup == nullptr) return false;
  *out = impl_->setup->config;
  return true;
}

absl::Status ShardStore::Restore(const std::vector<KeyState>& keys, int64_t step) {
  std::vector<std::pair<const KeyState*, KeyEntry*>> found;
  const Setup* setup = nullptr;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    setup = impl_->setup.get();
    if (setup == nullptr) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
    DTRAIN_RETURN_IF_ERROR(CheckRestoreCount(step, keys.size(), impl_->keys.size()));
    // Everything is checked before anything changes: a rollback is all or nothing.
    for (const KeyState& ks : keys) {
      auto it = impl_->keys.find(ks.key);
      if (it == impl_->keys.end()) {
        return absl::NotFoundError(absl::StrCat("restoring step ", step, ": key ", ks.key, " is not held here"));
      }
      DTRAIN_RETURN_IF_ERROR(CheckRestoredKey(ks, step, it->second->numel, setup->state_slots));
      found.emplace_back(&ks, it->second.get());
    }
  }
  const std::string why = absl::StrCat("rolled back to step ", step);
  for (auto& [ks, k] : found) {
    absl::MutexLock lock(&k->mu);
    impl_->CountParked(setup, -k->RollBack(*ks, absl::AbortedError(absl::StrCat(why, " (pull of key ", ks->key, ")"))));
  }
  DTRAIN_LOG(WARNING) << why << ": " << found.size() << " keys restored";
  return absl::OkStatus();
}

void ShardStore::SetLimits(const StoreLimits& limits) {
  absl::MutexLock lock(&impl_->mu);
  impl_->limits = limits;
}

int64_t ShardStore::parked_pulls() const { return impl_->parked_pulls.load(std::memory_order_relaxed); }

int64_t ShardStore::bytes_held() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return impl_->bytes_held;
}

absl::StatusOr<int64_t> ShardStore::ElementCount(uint64_t key) const {
  KeyEntry* k = nullptr;
  const Setup* setup = nullptr;
  if (absl::Status s = impl_->Find(key, &k, &setup); !s.ok()) return s;
  return k->numel;  // fixed when the key was made
}

int64_t ShardStore::num_keys() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return static_cast<int64_t>(impl_->keys.size());
}

int64_t ShardStore::updates_applied() const { return impl_->updates_applied.load(std::memory_order_relaxed); }

}  // namespace dtrain::kv
