#include "common/kv/shard_store.h"
#include "common/kv/store_config.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/kv/vector_loop.h"
#include "common/log.h"

namespace dtrain::kv {
namespace {

struct ParkedPull {
  int worker_rank;
  int64_t min_version;
  absl::Time parked_at;
  absl::Time deadline;
  PullCallback done;
};

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One loop per function: GCC 12 at -O2 vectorises neither of two such loops sharing
// one (see vector_loop.h).
ABSL_ATTRIBUTE_NOINLINE void AddInto(float* __restrict acc, const float* __restrict g, int64_t n) {
  ForEachElement(n, [=](int64_t i) { acc[i] += g[i]; });
}

ABSL_ATTRIBUTE_NOINLINE void DivideBy(float* __restrict acc, int64_t n, float d) {
  ForEachElement(n, [=](int64_t i) { acc[i] /= d; });
}


// One key. Everything but `shape`/`numel` (fixed at creation) is guarded by `mu`.
struct KeyEntry {
  explicit KeyEntry(int num_workers)
      : pending(num_workers),
        has_pending(num_workers, false),
        last_push_step(num_workers, -1),
        last_pull_version(num_workers, -1) {}

  absl::Mutex mu;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t version = 0;
  std::vector<float> values;
  std::vector<float> state;
  // Sync: each worker's gradient for step `version`; buffers are kept between steps.
  std::vector<std::vector<float>> pending;
  std::vector<bool> has_pending;
  int pending_count = 0;
  std::vector<float> merged;
  // When the pending step first had a push or a parked pull: how long it has stalled.
  absl::Time waiting_since = absl::InfiniteFuture();
  // When the pending step's first push arrived (for StoreObserver::OnSyncStepMerged).
  absl::Time first_push_at;
  // Async: each worker's last applied step, and the version it last pulled (-1: none),
  // from which a push's staleness is counted.
  std::vector<int64_t> last_push_step;
  std::vector<int64_t> last_pull_version;
  std::vector<ParkedPull> parked;
};

}  // namespace

struct ShardStore::Impl {
  explicit Impl(Clock c) : clock(std::move(c)) {}

  Clock clock;
  mutable absl::Mutex mu;  // config and the key map; keys are never removed
  bool configured = false;
  StoreConfig config;
  std::unique_ptr<Optimizer> optimizer;
  std::map<uint64_t, std::unique_ptr<KeyEntry>> keys;
  absl::Time last_still_waiting_log = absl::InfinitePast();

  // Per worker, unix nanos of the last message; 0 = never. Sized at Configure.
  std::unique_ptr<std::atomic<int64_t>[]> last_heard;
  std::atomic<int64_t> updates_applied{0};
  StoreObserver* observer = nullptr;  // set before Configure, then read-only

  // The key, plus what Push/Pull need from the config (immutable once configured).
  absl::Status Find(uint64_t key, KeyEntry** out) const {
    absl::ReaderMutexLock lock(&mu);
    if (!configured) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
    auto it = keys.find(key);
    if (it == keys.end()) return absl::NotFoundError(absl::StrCat("key ", key, " is not held by this server"));
    *out = it->second.get();
    return absl::OkStatus();
  }

  absl::Status CheckWorker(int worker_rank) const {
    if (worker_rank < 0 || worker_rank >= config.num_workers) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker_rank ", worker_rank, " out of range [0, ", config.num_workers, ")"));
    }
    return absl::OkStatus();
  }

  // "worker 2 (last heard 31 s ago)" or "worker 2 (never heard from)".
  std::string WorkerText(int w, absl::Time now) const {
    const int64_t ns = last_heard[w].load(std::memory_order_relaxed);
    if (ns == 0) return absl::StrCat("worker ", w, " (never heard from)");
    return absl::StrCat("worker ", w, " (last heard ", absl::ToInt64Seconds(now - absl::FromUnixNanos(ns)),
                        " s ago)");
  }

  std::vector<int> Missing(const KeyEntry& k) const {
    std::vector<int> missing;
    for (int w = 0; w < config.num_workers; ++w) {
      if (!k.has_pending[w]) missing.push_back(w);
    }
    return missing;
  }

  // Answers parked pulls the key's version now satisfies. Caller holds k.mu.
  static void FireReady(KeyEntry& k) {
    auto ready = std::stable_partition(k.parked.begin(), k.parked.end(),
                                       [&k](const ParkedPull& p) { return p.min_version > k.version; });
    for (auto it = ready; it != k.parked.end(); ++it) {
      it->done(absl::OkStatus(), k.version, k.values.data(), k.numel);
    }
    k.parked.erase(ready, k.parked.end());
  }

  void Apply(KeyEntry& k, const float* grad) {
    optimizer->Update(k.version, k.values.data(), grad, k.state.data(), k.numel);
    ++k.version;
    updates_applied.fetch_add(1, std::memory_order_relaxed);
    if (observer != nullptr) observer->OnUpdateApplied();
  }

  // Sums the step's gradients in rank order (bit-reproducible whatever the arrival
  // order), averages, applies once. The last push to arrive (`last_rank`, `last_grad`)
  // is read in place rather than stored: with one worker nothing is copied. Caller
  // holds k.mu.
  void MergeSync(KeyEntry& k, int last_rank, const float* last_grad) {
    const int n = config.num_workers;
    if (observer != nullptr) observer->OnSyncStepMerged(clock() - k.first_push_at);
    auto grad_of = [&](int w) { return w == last_rank ? last_grad : k.pending[w].data(); };
    if (n == 1) {
      Apply(k, last_grad);
      ResetPending(k);
      return;
    }
    k.merged.assign(grad_of(0), grad_of(0) + k.numel);
    float* acc = k.merged.data();
    for (int w = 1; w < n; ++w) AddInto(acc, grad_of(w), k.numel);
    DivideBy(acc, k.numel, static_cast<float>(n));
    Apply(k, acc);
    ResetPending(k);
  }

  void ResetPending(KeyEntry& k) {
    std::fill(k.has_pending.begin(), k.has_pending.end(), false);
    k.pending_count = 0;
    k.waiting_since = k.parked.empty() ? absl::InfiniteFuture() : clock();
  }
};

ShardStore::ShardStore(Clock clock) : impl_(std::make_unique<Impl>(std::move(clock))) {}

ShardStore::~ShardStore() {
  // Nobody may be left waiting on a pull that can no longer be answered.
  for (auto& [key, k] : impl_->keys) {
    absl::MutexLock lock(&k->mu);
    for (ParkedPull& p : k->parked) {
      p.done(absl::CancelledError(absl::StrCat("key ", key, ": parameter server shutting down")), k->version,
             nullptr, 0);
    }
    k->parked.clear();
  }
}

absl::Status ShardStore::Configure(const StoreConfig& config) {
  absl::MutexLock lock(&impl_->mu);
  if (impl_->configured) {
    const std::string diff = DescribeConfigDiff(impl_->config, config);
    if (diff.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("shard store already configured differently (current vs requested): ", diff));
  }
  if (config.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers must be >= 1, got ", config.num_workers));
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config.optimizer);
  if (!opt.ok()) return opt.status();
  impl_->optimizer = *std::move(opt);
  impl_->config = config;
  impl_->last_heard = std::make_unique<std::atomic<int64_t>[]>(config.num_workers);
  for (int w = 0; w < config.num_workers; ++w) impl_->last_heard[w].store(0);
  impl_->configured = true;
  return absl::OkStatus();
}

bool ShardStore::configured() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return impl_->configured;
}

absl::Status ShardStore::InitKey(uint64_t key, const std::vector<int64_t>& shape, const float* values,
                                 int64_t numel, int64_t version, const std::vector<float>& state) {
  absl::MutexLock lock(&impl_->mu);
  if (!impl_->configured) return absl::FailedPreconditionError("shard store not configured yet (Configure first)");
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }) || NumElements(shape) != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("key ", key, ": shape ", ShapeText(shape), " does not hold ", numel, " elements"));
  }
  if (numel > 0 && values == nullptr) return absl::InvalidArgumentError(absl::StrCat("key ", key, ": no values"));
  if (version < 0) return absl::InvalidArgumentError(absl::StrCat("key ", key, ": negative version ", version));
  const int64_t state_size = impl_->optimizer->StateSlots() * numel;
  if (!state.empty() && static_cast<int64_t>(state.size()) != state_size) {
    return absl::InvalidArgumentError(absl::StrCat("key ", key, ": optimizer state has ", state.size(),
                                                   " floats, want ", state_size, " (", impl_->config.optimizer.name,
                                                   " state for ", numel, " elements)"));
  }
  auto it = impl_->keys.find(key);
  if (it != impl_->keys.end()) {
    if (it->second->shape == shape) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("key ", key, " already exists with shape ",
                                                      ShapeText(it->second->shape), ", not ", ShapeText(shape)));
  }
  auto k = std::make_unique<KeyEntry>(impl_->config.num_workers);
  k->shape = shape;
  k->numel = numel;
  k->version = version;
  k->values.assign(values, values + numel);
  if (state.empty()) {
    k->state.assign(state_size, 0.0f);
  } else {
    k->state = state;
  }
  impl_->keys.emplace(key, std::move(k));
  return absl::OkStatus();
}

absl::Status ShardStore::Push(int worker_rank, int64_t step, uint64_t key, const float* grad, int64_t numel) {
  KeyEntry* k = nullptr;
  if (absl::Status s = impl_->Find(key, &k); !s.ok()) return s;
  if (absl::Status s = impl_->CheckWorker(worker_rank); !s.ok()) return s;
  NoteHeardFrom(worker_rank);
  if (numel != k->numel) {
    return absl::InvalidArgumentError(absl::StrCat("push of key ", key, " by worker ", worker_rank, " has ", numel,
                                                   " elements, but the key has ", k->numel, " (shape ",
                                                   ShapeText(k->shape), ")"));
  }
  absl::MutexLock lock(&k->mu);
  if (impl_->config.mode == MergeMode::kAsync) {
    if (step <= k->last_push_step[worker_rank]) return absl::OkStatus();  // a retry
    k->last_push_step[worker_rank] = step;
    if (impl_->observer != nullptr && k->last_pull_version[worker_rank] >= 0) {
      impl_->observer->OnAsyncPushApplied(k->version - k->last_pull_version[worker_rank]);
    }
    impl_->Apply(*k, grad);
    Impl::FireReady(*k);
    return absl::OkStatus();
  }
  if (step < k->version) return absl::OkStatus();  // that step is merged: a retry
  if (step > k->version) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker_rank, " pushed key ", key, " for step ", step,
                                                      " but the key is at version ", k->version,
                                                      " (pull before pushing the next step)"));
  }
  if (k->has_pending[worker_rank]) return absl::OkStatus();  // a retry
  if (k->pending_count == 0) {
    k->first_push_at = impl_->clock();
    if (k->parked.empty()) k->waiting_since = k->first_push_at;
  }
  if (k->pending_count + 1 == impl_->config.num_workers) {
    impl_->MergeSync(*k, worker_rank, grad);
    Impl::FireReady(*k);
    return absl::OkStatus();
  }
  k->pending[worker_rank].assign(grad, grad + numel);
  k->has_pending[worker_rank] = true;
  ++k->pending_count;
  return absl::OkStatus();
}

void ShardStore::Pull(int worker_rank, uint64_t key, int64_t min_version, absl::Time deadline, PullCallback done) {
  KeyEntry* k = nullptr;
  absl::Status s = impl_->Find(key, &k);
  if (s.ok()) s = impl_->CheckWorker(worker_rank);
  if (!s.ok()) {
    done(s, 0, nullptr, 0);
    return;
  }
  NoteHeardFrom(worker_rank);
  absl::MutexLock lock(&k->mu);
  if (impl_->config.mode == MergeMode::kAsync || k->version >= min_version) {
    k->last_pull_version[worker_rank] = k->version;
    done(absl::OkStatus(), k->version, k->values.data(), k->numel);
    return;
  }
  if (k->pending_count == 0 && k->parked.empty()) k->waiting_since = impl_->clock();
  k->parked.push_back({worker_rank, min_version, impl_->clock(), deadline, std::move(done)});
}

void ShardStore::CheckDeadlines(absl::Time now, absl::Duration still_waiting_every) {
  std::vector<std::pair<uint64_t, KeyEntry*>> keys;
  {
    absl::ReaderMutexLock lock(&impl_->mu);
    if (!impl_->configured) return;
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
    const std::vector<int> missing = impl_->Missing(*k);
    std::string why;  // built once per key, only if a pull expires
    auto expired = std::stable_partition(k->parked.begin(), k->parked.end(),
                                         [now](const ParkedPull& p) { return p.deadline > now; });
    for (auto it = expired; it != k->parked.end(); ++it) {
      if (why.empty()) {
        std::vector<std::string> names;
        for (int w : missing) names.push_back(impl_->WorkerText(w, now));
        why = absl::StrCat("step ", k->version, " key ", key, ": waiting for ", absl::StrJoin(names, ", "));
      }
      it->done(absl::DeadlineExceededError(absl::StrCat(
                   why, "; worker ", it->worker_rank, "'s pull of version ", it->min_version, " timed out after ",
                   absl::ToInt64Seconds(now - it->parked_at), " s")),
               k->version, nullptr, 0);
    }
    k->parked.erase(expired, k->parked.end());
    if (k->parked.empty() && k->pending_count == 0) {
      k->waiting_since = absl::InfiniteFuture();  // its waiters gave up: nothing stalls now
      continue;
    }
    if (now - k->waiting_since < still_waiting_every) continue;
    Stall& st = stalls[k->version];
    if (st.num_keys++ == 0) {
      st.first_key = key;
      st.missing.assign(impl_->config.num_workers, false);
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
      if (st.missing[w]) names.push_back(impl_->WorkerText(w, now));
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
    if (keys.empty()) {
      for (auto& [key, k] : impl_->keys) found.emplace_back(key, k.get());
    }
    for (uint64_t key : keys) {
      auto it = impl_->keys.find(key);
      if (it == impl_->keys.end()) {
        return absl::NotFoundError(absl::StrCat("key ", key, " is not held by this server"));
      }
      found.emplace_back(key, it->second.get());
    }
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
  if (!impl_->configured || worker_rank < 0 || worker_rank >= impl_->config.num_workers) return;
  const int64_t before =
      impl_->last_heard[worker_rank].exchange(absl::ToUnixNanos(impl_->clock()), std::memory_order_relaxed);
  if (before == 0 && impl_->observer != nullptr) impl_->observer->OnWorkerSeen(worker_rank);
}

void ShardStore::SetObserver(StoreObserver* observer) {
  absl::MutexLock lock(&impl_->mu);
  impl_->observer = observer;
}

int64_t ShardStore::num_keys() const {
  absl::ReaderMutexLock lock(&impl_->mu);
  return static_cast<int64_t>(impl_->keys.size());
}

int64_t ShardStore::updates_applied() const { return impl_->updates_applied.load(std::memory_order_relaxed); }

}  // namespace dtrain::kv
