#include "common/kv/shard_store.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/kv/heard_from.h"
#include "common/kv/key_checks.h"
#include "common/kv/key_entry.h"
#include "common/kv/key_snapshots.h"
#include "common/kv/key_update.h"
#include "common/kv/shard_store_impl.h"
#include "common/kv/stale_weight.h"
#include "common/kv/stall_report.h"
#include "common/kv/store_setup.h"
#include "common/kvstore_mode.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::kv {

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
  DTRAIN_RETURN_IF_ERROR(ValidateStoreConfig(config, impl_->limits));
  absl::StatusOr<std::unique_ptr<StoreSetup>> setup =
      MakeStoreSetup(config, impl_->observer, impl_->snapshots, impl_->step_ranks);
  if (!setup.ok()) return setup.status();
  (*setup)->step_lr = impl_->step_lr;
  if (config.mode == MergeMode::kSsp) impl_->ssp_staleness.store(config.staleness, std::memory_order_release);
  if (absl::Status s = (*setup)->fence->SetJobId(impl_->job_id); !s.ok()) return s;
  impl_->setup = *std::move(setup);
  return absl::OkStatus();
}

bool ShardStore::configured() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return impl_->setup != nullptr;
}

absl::Status ShardStore::InitKey(uint64_t key, const std::vector<int64_t>& shape, const float* values, int64_t numel,
                                 int64_t version, const std::vector<float>& state) {
  absl::MutexLock lock(&impl_->mu);
  const StoreSetup* setup = impl_->setup.get();
  if (setup == nullptr) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
  DTRAIN_RETURN_IF_ERROR(CheckNewKey(key, shape, values, numel, version));
  const int64_t state_size = setup->state_slots * numel;
  if (!state.empty() && static_cast<int64_t>(state.size()) != state_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key ", key, ": optimizer state has ", state.size(), " floats, want ", state_size, " (",
        setup->config.optimizer.name, " state for ", numel, " elements",
        setup->pull_codec != nullptr ? ", plus the pull compression's residual" : "",
        "; was the checkpoint written with another --optimizer, --momentum or --pull-gc-type?)",
        PullResidualHint(setup->pull_codec != nullptr, static_cast<int64_t>(state.size()), state_size, numel)));
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
  const bool keep_previous = setup->keep_previous;
  const int64_t bytes = KeyBytes(numel, state_size, keep_previous, setup->pull_codec.get());
  if (bytes > limits.max_bytes - impl_->bytes_held) {
    return absl::ResourceExhaustedError(absl::StrCat("key ", key, ": its ", bytes, " bytes of weights",
                                                     keep_previous ? " (twice: the previous version is kept too)" : "",
                                                     " and optimizer state would take this server to ",
                                                     impl_->bytes_held + bytes, " bytes, over its cap of ",
                                                     limits.max_bytes, " (--max-shard-bytes)"));
  }
  impl_->bytes_held += bytes;
  impl_->keys.emplace(key, std::make_unique<KeyEntry>(shape, version, std::vector<float>(values, values + numel),
                                                      state.empty() ? std::vector<float>(state_size, 0.0f) : state,
                                                      setup->config.num_workers, keep_previous));
  return absl::OkStatus();
}

absl::Status ShardStore::Push(int worker_rank, int64_t step, uint64_t key, const float* grad, int64_t numel,
                              int64_t lag) {
  KeyEntry* k = nullptr;
  const StoreSetup* setup = nullptr;
  if (absl::Status s = impl_->Find(key, &k, &setup); !s.ok()) return s;
  if (absl::Status s = Impl::CheckWorker(*setup, worker_rank); !s.ok()) return s;
  NoteHeardFrom(worker_rank);
  if (numel != k->numel) {
    return absl::InvalidArgumentError(absl::StrCat("push of key ", key, " by worker ", worker_rank, " has ", numel,
                                                   " elements, but the key has ", k->numel, " (shape ",
                                                   ShapeText(k->shape), ")"));
  }
  DTRAIN_RETURN_IF_ERROR(CheckPushLag(lag, setup->config.mode, setup->config.staleness, worker_rank, step, key));
  // A stale push is weighed as it is copied in (held ahead, pending, or as the step's
  // last), so the step's mean is the usual one.
  const float weight = StaleWeight(lag);
  absl::MutexLock lock(&k->mu);
  k->SeeWorker(worker_rank);
  const absl::StatusOr<PushAction> action = setup->rule->OnPush(k->Progress(key, worker_rank, step), worker_rank, step);
  if (!action.ok()) return action.status();
  if (*action == PushAction::kIgnore) return absl::OkStatus();
  k->last_push_step[worker_rank] = std::max(k->last_push_step[worker_rank], step);
  if (setup->observer != nullptr && setup->config.mode == MergeMode::kSsp) setup->observer->OnSspPushTaken(lag);
  if (*action == PushAction::kStoreAhead) {
    k->ahead.Hold(step, worker_rank, grad, numel, weight);
    return absl::OkStatus();
  }
  if (*action == PushAction::kApplyNow) {
    if (setup->observer != nullptr && k->last_pull_version[worker_rank] >= 0) {
      setup->observer->OnAsyncPushApplied(k->version - k->last_pull_version[worker_rank]);
    }
    impl_->Apply(*setup, *k, grad, absl::Now());
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
    if (weight != 1.0f) {
      // The last rank's own pending buffer is free: the merge reads the last push from `grad`.
      AssignWeighed(grad, numel, weight, &k->pending[worker_rank]);
      grad = k->pending[worker_rank].data();
    }
    impl_->MergeStep(*setup, *k, worker_rank, grad);
    Impl::MaybeSnapshot(*setup, key, *k);
    impl_->PromoteAhead(*setup, key, *k);
    impl_->FireReady(*setup, key, *k);
    return absl::OkStatus();
  }
  AssignWeighed(grad, numel, weight, &k->pending[worker_rank]);
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

void ShardStore::PullImpl(int worker_rank, uint64_t key, int64_t min_version, int64_t held_version, absl::Time deadline,
                          PullAnswerCallback done, uint64_t owner, PullMode mode) {
  KeyEntry* k = nullptr;
  const StoreSetup* setup = nullptr;
  absl::Status s = impl_->Find(key, &k, &setup);
  if (s.ok()) s = Impl::CheckWorker(*setup, worker_rank);
  if (s.ok() && mode == PullMode::kExact && setup->config.mode != MergeMode::kSync) {
    // Async versions count single pushes, not steps: nobody can redo "version v".
    s = absl::FailedPreconditionError(absl::StrCat("exact pull of key ", key, " version ", min_version, " by worker ",
                                                   worker_rank,
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
  return impl_->DropParked(
      [owner](const ParkedPull& p) { return p.owner == owner; },
      [](uint64_t key) { return absl::CancelledError(absl::StrCat("key ", key, ": the stream that asked is gone")); });
}

absl::Status ShardStore::AdmitWorker(int worker_rank, absl::string_view job_id, uint64_t incarnation) {
  if (job_id.empty() && incarnation == 0) return absl::OkStatus();
  const StoreSetup* setup = nullptr;
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
  const int64_t dropped = impl_->DropParked(
      [worker_rank](const ParkedPull& p) { return p.worker_rank == worker_rank; },
      [&why](uint64_t key) { return absl::FailedPreconditionError(absl::StrCat(why, " (pull of key ", key, ")")); });
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
  const StoreSetup* setup = nullptr;
  std::vector<std::pair<uint64_t, KeyEntry*>> keys;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    setup = impl_->setup.get();
    if (setup == nullptr) return;
    keys.reserve(impl_->keys.size());
    for (auto& [key, k] : impl_->keys) keys.emplace_back(key, k.get());
  }
  // Stalled keys grouped by step, for one "still waiting" line per step.
  StallReport stalls(setup->config.num_workers);
  for (auto& [key, k] : keys) {
    absl::MutexLock lock(&k->mu);
    if (k->parked.empty() && k->pending_count == 0) continue;
    const std::vector<int> missing = k->Missing(setup->step_ranks);
    const int64_t expired = k->parked.Expire(now, k->version, key, [&] { return setup->heard->Texts(missing, now); });
    impl_->CountParked(setup, -expired);
    if (k->parked.empty() && k->pending_count == 0) {
      k->waiting_since = absl::InfiniteFuture();  // its waiters gave up: nothing stalls now
      continue;
    }
    if (now - k->waiting_since < still_waiting_every) continue;
    stalls.Add(k->version, key, missing);
  }
  {
    absl::MutexLock lock(&impl_->mu);
    if (stalls.empty() || now - impl_->last_still_waiting_log < still_waiting_every) return;
    impl_->last_still_waiting_log = now;
  }
  for (const std::string& line : stalls.Lines(*setup->heard, now)) DTRAIN_LOG(WARNING) << line;
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
  const StoreSetup* setup = impl_->setup.get();
  if (setup == nullptr || worker_rank < 0 || worker_rank >= setup->config.num_workers) return;
  const bool first = setup->heard->Note(worker_rank, impl_->clock());
  if (first && setup->observer != nullptr) setup->observer->OnWorkerSeen(worker_rank);
}

void ShardStore::SetObserver(StoreObserver* observer) {
  absl::MutexLock lock(&impl_->mu);
  impl_->observer = observer;
}

void ShardStore::SetStepRanks(const StepRanks* ranks) {
  absl::MutexLock lock(&impl_->mu);
  impl_->step_ranks = ranks;
}

void ShardStore::SetStepLr(const StepLr* lr) {
  absl::MutexLock lock(&impl_->mu);
  impl_->step_lr = lr;
}

void ShardStore::SetSnapshotHook(int64_t every, SnapshotSink sink) {
  absl::MutexLock lock(&impl_->mu);
  impl_->snapshots = SnapshotHook(every, std::move(sink));
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
  const StoreSetup* setup = nullptr;
  if (absl::Status s = impl_->Find(key, &k, &setup); !s.ok()) return s;
  return k->numel;  // fixed when the key was made
}

int64_t ShardStore::num_keys() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return static_cast<int64_t>(impl_->keys.size());
}

int64_t ShardStore::updates_applied() const { return impl_->updates_applied.load(std::memory_order_relaxed); }
absl::Duration ShardStore::update_time() const {
  return absl::Nanoseconds(impl_->update_nanos.load(std::memory_order_relaxed));
}

}  // namespace dtrain::kv
