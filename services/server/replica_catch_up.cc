#include "services/server/replica_catch_up.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"
#include "common/kv/tensor_codec.h"
#include "common/kvstore_mode_wire.h"
#include "common/log.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"

namespace dtrain::server {
namespace {
// A copy is one key (at most a 4 MB chunk plus its optimizer state) on loopback or a
// LAN: seconds are plenty, and the held answers wait no longer than this.
constexpr absl::Duration kCopyTimeout = absl::Seconds(20);

bool InChain(const std::vector<int>& chain, int rank) {
  return std::find(chain.begin(), chain.end(), rank) != chain.end();
}
}  // namespace

ReplicaCatchUp::ReplicaCatchUp(kv::ShardStore* store, int my_rank, ServerMetrics* metrics)
    : store_(store), my_rank_(my_rank), metrics_(metrics), thread_([this] { Loop(); }) {}

ReplicaCatchUp::~ReplicaCatchUp() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ReplicaCatchUp::NoteConfigure(const v1::ConfigureRequest& req) {
  absl::MutexLock lock(&mu_);
  configure_ = req;
  have_configure_ = true;
  // dist_async has no step at which a copy holds still (every push moves the key). The
  // service refused a mode it cannot parse before this is called.
  const absl::StatusOr<KVStoreMode> mode = KVStoreModeOf(req.mode(), req.kv_store());
  sync_.store(!(mode.ok() && IsAsync(*mode)), std::memory_order_release);
}

void ReplicaCatchUp::NoteChain(uint64_t key, const std::vector<int>& chain) {
  if (chain.size() < 2) return;
  absl::MutexLock lock(&mu_);
  gates_[key].chain = chain;
  replicated_.store(true, std::memory_order_release);
}

void ReplicaCatchUp::ServerRestarted(int rank, const std::string& address) {
  if (rank == my_rank_ || address.empty()) return;
  absl::MutexLock lock(&mu_);
  bool shares = false;
  for (const auto& [key, gate] : gates_) shares |= InChain(gate.chain, rank);
  if (!shares) return;  // none of our keys is replicated there
  if (newcomers_.count(rank) == 0) pending_.fetch_add(1);
  newcomers_[rank] = address;
  copied_[rank].clear();
  configured_.erase(rank);
  DTRAIN_LOG(WARNING) << "server " << rank << " restarted at " << address
                      << ": copying our keys of its chains to it as they reach their next version";
}

bool ReplicaCatchUp::Hold(uint64_t key, int64_t version, Release release, std::vector<kv::JoinedServer>* joined_now) {
  joined_now->clear();
  // --replication 1, or dist_async.
  if (!replicated_.load(std::memory_order_acquire) || !sync_.load(std::memory_order_acquire)) return false;
  absl::MutexLock lock(&mu_);
  auto it = gates_.find(key);
  if (it == gates_.end()) return false;
  Gate& gate = it->second;
  if (gate.copying >= 0) {
    if (version != gate.copying) return false;  // an older version (an exact pull): not held
    gate.held.push_back(std::move(release));
    return true;
  }
  if (version == gate.joined_version) {
    // A pull that arrived after its version's copy was done (the key moved on the last
    // push, whose own pull came a moment later): without the names, that worker would
    // leave the newcomer out of its step-`version` push, and the newcomer would wait
    // for it until --sync-timeout.
    *joined_now = gate.joined;
    return false;
  }
  // Only a version's first answer may start a copy: once one answer of it went out
  // without a join, all of its answers must (every worker has to see the same).
  if (version <= gate.answered) return false;
  gate.answered = version;
  if (pending_.load(std::memory_order_relaxed) == 0) return false;
  Job job{key, version, {}, absl::Now()};
  for (const auto& [rank, address] : newcomers_) {
    if (InChain(gate.chain, rank) && copied_[rank].count(key) == 0) job.to.push_back({rank, address});
  }
  if (job.to.empty()) return false;
  gate.copying = version;
  gate.held.push_back(std::move(release));
  jobs_.push_back(std::move(job));
  return true;
}

void ReplicaCatchUp::Loop() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (jobs_.empty()) return;  // stopping, nothing left to release
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Run(job);
  }
}

void ReplicaCatchUp::Run(const Job& job) {
  std::vector<kv::KeyState> state;
  absl::Status read = store_->Snapshot({job.key}, &state);
  std::vector<int> chain;
  {
    absl::MutexLock lock(&mu_);
    chain = gates_[job.key].chain;
  }
  std::vector<kv::JoinedServer> joined;
  for (const kv::JoinedServer& to : job.to) {
    absl::Status s = read;
    // The held answers keep the key at job.version; anything else is a bug to report,
    // not a state to copy.
    if (s.ok() && (state.size() != 1 || state[0].version != job.version)) {
      s = absl::InternalError(absl::StrCat("key ", job.key, " is at version ", state.empty() ? -1 : state[0].version,
                                           ", not ", job.version));
    }
    if (s.ok()) s = CopyTo(to, state[0], chain);
    if (!s.ok()) {
      // The answers go out without this newcomer; the next version tries again.
      DTRAIN_LOG(WARNING) << "could not copy key " << job.key << " version " << job.version << " to server " << to.rank
                          << " at " << to.address << ": " << s.message();
      continue;
    }
    joined.push_back(to);
  }
  std::vector<Release> held;
  {
    absl::MutexLock lock(&mu_);
    Gate& gate = gates_[job.key];
    held.swap(gate.held);
    gate.copying = -1;
    if (!joined.empty()) {
      gate.joined_version = job.version;
      gate.joined = joined;
    }
    for (const kv::JoinedServer& to : joined) {
      auto it = newcomers_.find(to.rank);
      if (it == newcomers_.end() || it->second != to.address) continue;  // restarted again meanwhile
      copied_[to.rank].insert(job.key);
      bool all = true;
      for (const auto& [key, g] : gates_) all &= !InChain(g.chain, to.rank) || copied_[to.rank].count(key) > 0;
      if (all) {
        DTRAIN_LOG(WARNING) << "server " << to.rank << " holds every key of ours in its chains again (last: key "
                            << job.key << " at version " << job.version << ")";
        newcomers_.erase(it);
        pending_.fetch_sub(1);
      }
    }
  }
  if (metrics_ != nullptr) {
    const double held_seconds = absl::ToDoubleSeconds(absl::Now() - job.held_since);
    for (const kv::JoinedServer& to : job.to) {
      const bool ok =
          std::any_of(joined.begin(), joined.end(), [&](const kv::JoinedServer& j) { return j.rank == to.rank; });
      metrics_->CatchUpCopy(held_seconds, ok);
    }
  }
  for (Release& r : held) r(joined);
}

absl::Status ReplicaCatchUp::CopyTo(const kv::JoinedServer& to, const kv::KeyState& state,
                                    const std::vector<int>& chain) {
  auto stub = v1::ParameterServer::NewStub(MakeChannel(to.address));
  bool configured;
  v1::ConfigureRequest configure;
  {
    absl::MutexLock lock(&mu_);
    configured = configured_.count(to.rank) > 0;
    if (!have_configure_) return absl::FailedPreconditionError("this server was never configured");
    configure = configure_;
  }
  if (!configured) {
    grpc::ClientContext ctx;
    // No wait_for_ready: the newcomer listens before it registers, so an unreachable
    // one is gone again and the held answers should not wait for it.
    ctx.set_deadline(DeadlineAfter(kCopyTimeout));
    v1::ConfigureResponse resp;
    if (absl::Status s = FromGrpc(stub->Configure(&ctx, configure, &resp)); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    configured_.insert(to.rank);
  }
  v1::InitKeysRequest req;
  v1::KeyInit* k = req.add_keys();
  k->set_key(state.key);
  for (int64_t d : state.shape) k->add_shape(d);
  k->set_dtype(v1::DTYPE_FLOAT32);
  k->set_values(kv::FloatsToBytes(state.values.data(), static_cast<int64_t>(state.values.size())));
  k->set_version(state.version);
  k->set_optimizer_state(
      kv::FloatsToBytes(state.optimizer_state.data(), static_cast<int64_t>(state.optimizer_state.size())));
  for (int r : chain) k->add_chain(r);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(kCopyTimeout));
  v1::InitKeysResponse resp;
  return FromGrpc(stub->InitKeys(&ctx, req, &resp));
}

}  // namespace dtrain::server
