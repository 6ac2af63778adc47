#include "services/worker/kv/dist_kvstore.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/kv/resume_states.h"

namespace dtrain::worker {
namespace {
constexpr absl::Duration kClientGrace = absl::Seconds(3);
}  // namespace

DistKVStore::DistKVStore(DistOptions options, Cluster& cluster) : options_(options), cluster_(cluster) {}

DistKVStore::~DistKVStore() = default;

absl::StatusOr<std::unique_ptr<DistKVStore>> DistKVStore::Connect(const DistOptions& options, Cluster& cluster) {
  std::unique_ptr<DistKVStore> store(new DistKVStore(options, cluster));
  for (const ServerEndpoint& server : cluster.servers()) {
    DTRAIN_ASSIGN_OR_RETURN(auto client,
                            PsClient::Connect(server.address, server.rank, cluster.rank(), options.connect_timeout));
    // The server answers a stalled sync pull at sync_timeout naming the missing
    // workers; our own wait lasts a little longer so that answer arrives first.
    client->SetPullTimeout(options.sync_timeout);
    // Every request then carries who we are, so the servers fence the incarnation this
    // process replaced (and refuse us once we are replaced ourselves).
    client->SetIdentity(cluster.job_id(), cluster.incarnation());
    store->servers_.push_back(std::move(client));
  }
  DTRAIN_LOG(INFO) << "kv-store " << KVStoreModeName(options.mode) << ": connected to " << store->servers_.size()
                   << " servers";
  return store;
}

absl::Status DistKVStore::Init(const std::vector<ParamRef>& params, const KVStoreInit& init) {
  params_ = params;
  optimizer_name_ = init.optimizer.name;
  std::vector<int64_t> sizes;
  for (const auto& p : params_) sizes.push_back(p.numel);
  placement_ = kv::ComputePlacement(sizes, static_cast<int>(servers_.size()));
  const absl::Duration timeout = options_.sync_timeout;
  if (cluster_.rejoined()) return Rejoin();

  // Worker 0 configures the servers and gives every key its first value, as MXNet's
  // kv.init + set_optimizer from rank 0.
  if (cluster_.rank() == 0) DTRAIN_RETURN_IF_ERROR(ConfigureServers(init));
  DTRAIN_RETURN_IF_ERROR(cluster_.Barrier("kvstore-init", timeout));
  // Everyone (rank 0 too, for uniformity) starts from the servers' weights.
  int64_t min_version = init.start_version;
  for (const auto& slice : placement_.slices) {
    float* w = params_[slice.param_index].weights + slice.offset;
    servers_[slice.server]->Pull(slice.key, min_version, w, slice.length);
  }
  return WaitAllServers(absl::Now() + timeout + kClientGrace);
}

absl::Status DistKVStore::Rejoin() {
  if (IsAsync(options_.mode)) {
    // TODO(recovery): async resumes from max last_push_step + 1 with the current weights.
    return absl::UnimplementedError(
        "this worker replaced a dead one, but resuming is only implemented for dist_sync (docs/recovery.md)");
  }
  const absl::Duration timeout = options_.sync_timeout;
  // GetVersions also fences the incarnation we replace before our first push.
  absl::flat_hash_map<uint64_t, int64_t> versions;
  for (auto& s : servers_) {
    DTRAIN_ASSIGN_OR_RETURN(std::vector<kv::KeyVersion> got, s->GetVersions({}, timeout));
    for (const kv::KeyVersion& v : got) versions[v.key] = v.version;
  }
  // In dist_sync a key is at t+1 once every worker's step-t push of it merged, so the
  // step nobody can have finished is the lowest version: redo it. No key can move
  // past t+1 meanwhile, since the others wait for our step-t pushes.
  int64_t t = -1;
  for (const auto& slice : placement_.slices) {
    auto it = versions.find(slice.key);
    if (it == versions.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rejoining: server ", slice.server, " at ", servers_[slice.server]->address(), " does not hold key ",
          slice.key, " (not configured, or another model)"));
    }
    if (t < 0 || it->second < t) t = it->second;
  }
  // Exactly version t of every key: a key whose step t already merged (at t+1) is
  // answered from the previous version its server keeps, so the redone gradients are
  // bit-identical to the dead worker's.
  std::vector<int64_t> pulled(placement_.slices.size(), -1);
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    float* w = params_[slice.param_index].weights + slice.offset;
    servers_[slice.server]->PullExact(slice.key, t, w, slice.length, &pulled[i]);
  }
  DTRAIN_RETURN_IF_ERROR(WaitAllServers(absl::Now() + timeout + kClientGrace));
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    if (pulled[i] == t) continue;
    const auto& slice = placement_.slices[i];
    return absl::FailedPreconditionError(absl::StrCat(
        "rejoining at step ", t, ": server ", slice.server, " at ", servers_[slice.server]->address(),
        " answered the exact pull of key ", slice.key, " version ", t, " with version ", pulled[i],
        " (a dtrain-server without exact pulls?); redoing the step from it would not be bit-exact"));
  }
  resume_step_ = t;
  DTRAIN_LOG(WARNING) << "rejoined the job as worker " << cluster_.rank() << " incarnation " << cluster_.incarnation()
                      << ": redoing step " << t;
  return absl::OkStatus();
}

absl::Status DistKVStore::ConfigureServers(const KVStoreInit& init) {
  const absl::Duration timeout = options_.sync_timeout;
  DTRAIN_ASSIGN_OR_RETURN(ResumeIndex resume, IndexResumeStates(init.resume, optimizer_name_));
  std::vector<std::vector<kv::KeyState>> per_server(servers_.size());
  for (const auto& slice : placement_.slices) {
    kv::KeyState k;
    k.key = slice.key;
    k.shape = {slice.length};
    k.version = init.start_version;
    const float* w = params_[slice.param_index].weights + slice.offset;
    k.values.assign(w, w + slice.length);
    DTRAIN_RETURN_IF_ERROR(resume.Take(slice.key, &k.version, &k.optimizer_state));
    per_server[slice.server].push_back(std::move(k));
  }
  DTRAIN_RETURN_IF_ERROR(resume.CheckAllUsed());
  for (size_t s = 0; s < servers_.size(); ++s) {
    DTRAIN_RETURN_IF_ERROR(servers_[s]->Configure(options_.mode, cluster_.num_workers(), init.optimizer, timeout));
    DTRAIN_RETURN_IF_ERROR(servers_[s]->InitKeys(per_server[s], timeout));
  }
  return absl::OkStatus();
}

absl::Status DistKVStore::PushPull(int64_t step, const std::vector<const float*>& grads) {
  DTRAIN_RETURN_IF_ERROR(cluster_.JobStatus());
  if (grads.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushPull got ", grads.size(), " gradients for ", params_.size(), " parameters"));
  }
  const absl::Time start = absl::Now();
  int first_server = -1;
  worker::PsClient::Ticket first_ticket = 0;
  for (const auto& slice : placement_.slices) {
    const worker::PsClient::Ticket t =
        servers_[slice.server]->PushPull(step, slice.key, grads[slice.param_index] + slice.offset,
                                         params_[slice.param_index].weights + slice.offset, slice.length);
    if (first_server < 0) {
      first_server = slice.server;
      first_ticket = t;
    }
  }
  const absl::Time submitted = absl::Now();
  const absl::Time deadline = submitted + options_.sync_timeout + kClientGrace;
  // Every worker sends the keys in the same order and a sync key is answered once all
  // pushes of it are in, so the first key's answer marks the end of waiting for the
  // others; the rest is mostly the weights' transfer.
  absl::Status first;
  if (first_server >= 0) first = servers_[first_server]->Wait(first_ticket, deadline);
  const absl::Time first_answer = absl::Now();
  absl::Status rest = WaitAllServers(deadline);
  const absl::Time end = absl::Now();
  last_timing_.push = absl::ToDoubleSeconds(submitted - start);
  last_timing_.wait = absl::ToDoubleSeconds(first_answer - submitted);
  last_timing_.pull = absl::ToDoubleSeconds(end - first_answer);
  return first.ok() ? rest : first;
}

absl::Status DistKVStore::WaitAllServers(absl::Time deadline) {
  absl::Status first;
  for (auto& s : servers_) {
    absl::Status st = s->WaitAll(deadline);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

absl::StatusOr<checkpoint::OptimizerStates> DistKVStore::SaveStates() {
  checkpoint::OptimizerStates out;
  out.optimizer = optimizer_name_;
  for (auto& s : servers_) {
    DTRAIN_ASSIGN_OR_RETURN(std::vector<kv::KeyState> snaps, s->GetState({}, options_.sync_timeout));
    for (auto& k : snaps) out.keys.push_back(StateOnly(std::move(k)));
  }
  return out;
}

KVStoreStats DistKVStore::stats() const {
  KVStoreStats st;
  for (const auto& s : servers_) {
    st.bytes_pushed += s->bytes_pushed();
    st.bytes_pulled += s->bytes_pulled();
  }
  return st;
}

}  // namespace dtrain::worker
