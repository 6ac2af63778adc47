#include "services/worker/kv/dist_kvstore.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kv/replica_chain.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/kv/ps_client.h"
#include "services/worker/kv/resume_states.h"
#include "services/worker/kv/striped_channel.h"

namespace dtrain::worker {

absl::StatusOr<std::unique_ptr<ServerChannel>> ConnectPsClient(int server_rank, const std::string& address,
                                                               int worker_rank, absl::Duration connect_timeout) {
  DTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client,
                          PsClient::Connect(address, server_rank, worker_rank, connect_timeout));
  return std::unique_ptr<ServerChannel>(std::move(client));
}

DistKVStore::DistKVStore(DistOptions options, Cluster& cluster, ChannelFactory connect, Clock clock)
    : options_(options),
      cluster_(cluster),
      cluster_recovery_(cluster.recovery()),
      connect_(std::move(connect)),
      now_(std::move(clock)) {}

DistKVStore::~DistKVStore() = default;

absl::StatusOr<std::unique_ptr<DistKVStore>> DistKVStore::Connect(const DistOptions& options, Cluster& cluster,
                                                                  ChannelFactory connect, Clock clock) {
  if (connect == nullptr) {
    connect = [n = options.connections_per_server](int server_rank, const std::string& address, int worker_rank,
                                                   absl::Duration timeout) {
      return ConnectPsClients(server_rank, address, worker_rank, timeout, n);
    };
  }
  std::unique_ptr<DistKVStore> store(new DistKVStore(options, cluster, std::move(connect), std::move(clock)));
  DTRAIN_RETURN_IF_ERROR(store->Reconnect(cluster.servers()));
  DTRAIN_RETURN_IF_ERROR(kv::CheckReplication(options.replication, static_cast<int>(store->servers_.size())));
  DTRAIN_LOG(INFO) << "kv-store " << KVStoreModeName(options.mode) << ": connected to " << store->servers_.size()
                   << " servers"
                   << (options.connections_per_server > 1
                           ? absl::StrCat(", ", options.connections_per_server, " connections to each")
                           : "")
                   << (options.replication > 1 ? absl::StrCat(", replication ", options.replication) : "")
                   << (options.compression.type == kv::CompressionType::kNone
                           ? std::string()
                           : absl::StrCat(
                                 ", gradient compression ", kv::CompressionTypeName(options.compression.type),
                                 options.compression.type == kv::CompressionType::kTwoBit
                                     ? absl::StrCat(
                                           " (threshold ", options.compression.threshold,
                                           options.gradient_scale != 1
                                               ? absl::StrCat(" for gradients summed over the batch, ",
                                                              options.compression.threshold / options.gradient_scale,
                                                              " on its mean")
                                               : std::string(),
                                           ")")
                                     : std::string()))
                   << (options.pull_compression == kv::CompressionType::kNone
                           ? std::string()
                           : absl::StrCat(", pull compression ", kv::CompressionTypeName(options.pull_compression)));
  return store;
}

absl::Status DistKVStore::Init(const std::vector<ParamRef>& params, const KVStoreInit& init) {
  params_ = params;
  optimizer_name_ = init.optimizer.name;
  std::vector<int64_t> sizes;
  for (const auto& p : params_) sizes.push_back(p.numel);
  DTRAIN_ASSIGN_OR_RETURN(const int64_t bound, ChunkElems(sizes, init));
  placement_ = kv::ComputePlacement(sizes, static_cast<int>(servers_.size()), bound);
  held_versions_.assign(placement_.slices.size(), -1);
  if (const kv::ChunkAdvice advice = kv::SuggestChunkElems(sizes, placement_, bound);
      advice.bound > 0 && cluster_.rank() == 0) {
    // A bound the user gave that leaves one server most of the elements, and so of every
    // step's bytes (LeNet at 1 Gbit/s with 1048576: 0.72x DDP; 1.11x cut as AutoChunkElems cuts it).
    DTRAIN_LOG(WARNING) << "placement: server " << advice.busiest_server << " holds "
                        << absl::StrFormat("%.0f%%", 100.0 * advice.busiest_share) << " of the model's "
                        << advice.total_elems << " elements (--bigarray-bound " << bound
                        << " keeps smaller tensors whole), and so of every step's traffic; --bigarray-bound "
                        << advice.bound
                        << " would spread them (every worker must pass the same bound, and a resume the one its "
                           "checkpoint was written with)";
  }
  std::vector<int> homes;
  slice_of_.clear();
  slices_of_param_.assign(params_.size(), {});
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    homes.push_back(placement_.slices[i].server);
    slice_of_[placement_.slices[i].key] = i;
    slices_of_param_[placement_.slices[i].param_index].push_back(i);
  }
  routing_ = std::make_unique<ReplicaRouting>(homes, options_.replication, static_cast<int>(servers_.size()));
  compressor_ = PushCompressor(options_.compression, options_.gradient_scale);
  compressor_.Reset(placement_);
  const absl::Duration timeout = options_.sync_timeout;
  if (options_.join_step >= 0) return JoinAt(options_.join_step);
  if (cluster_recovery_ != nullptr && cluster_recovery_->rejoined()) return Rejoin(init);

  // Worker 0 configures the servers and gives every key its first value, as MXNet's
  // kv.init + set_optimizer from rank 0.
  if (cluster_.rank() == 0) DTRAIN_RETURN_IF_ERROR(ConfigureServers(init));
  DTRAIN_RETURN_IF_ERROR(cluster_.Barrier("kvstore-init", timeout));
  // Everyone (rank 0 too, for uniformity) starts from the servers' weights.
  int64_t min_version = init.start_version;
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    float* w = params_[slice.param_index].weights + slice.offset;
    servers_[routing_->chain(i).front()]->Submit(KeyRequest::Pull(slice.key, min_version, w, slice.length));
  }
  return WaitAllServers(now_() + timeout + kClientGrace);
}

absl::Status DistKVStore::Reconnect(const std::vector<ServerEndpoint>& servers) {
  if (!servers_.empty() && servers.size() != servers_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the scheduler names ", servers.size(), " servers, this worker has ", servers_.size()));
  }
  std::vector<std::unique_ptr<ServerChannel>> clients;
  for (const ServerEndpoint& server : servers) {
    // A dead server's ranges go on at their other replicas: waiting the start-up
    // --connect-timeout on its old address would stall a replacement worker (killed
    // beside it) while its partners serve. Its client fails UNAVAILABLE, which fails it
    // over, and its restarted process comes back by a join notice.
    const bool skip_wait = server.dead && options_.replication > 1;
    DTRAIN_ASSIGN_OR_RETURN(auto client, ConnectServer(server.rank, server.address,
                                                       skip_wait ? absl::ZeroDuration() : options_.connect_timeout));
    if (skip_wait) {
      DTRAIN_LOG(WARNING) << "server " << server.rank << " at " << server.address
                          << " is dead (the scheduler says): its ranges go on at their other replicas until it is back";
    }
    clients.push_back(std::move(client));
  }
  servers_ = std::move(clients);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ServerChannel>> DistKVStore::ConnectServer(int rank, const std::string& address,
                                                                          absl::Duration timeout) {
  DTRAIN_ASSIGN_OR_RETURN(auto client, connect_(rank, address, cluster_.rank(), timeout));
  // The server answers a stalled sync pull at sync_timeout naming the missing
  // workers; our own wait lasts a little longer so that answer arrives first.
  client->SetPullTimeout(options_.sync_timeout);
  client->SetPullCompression(options_.pull_compression);
  // Every request then carries who we are, so the servers fence the incarnation this
  // process replaced (and refuse us once we are replaced ourselves).
  // Without a recovery part there is no identity: "" and 0 send nothing.
  if (cluster_recovery_ == nullptr) {
    client->SetIdentity("", 0);
  } else {
    client->SetIdentity(cluster_recovery_->job_id(), cluster_recovery_->incarnation());
  }
  return client;
}

absl::Status DistKVStore::ConfigureServers(const KVStoreInit& init) {
  const absl::Duration timeout = options_.sync_timeout;
  DTRAIN_ASSIGN_OR_RETURN(ResumeIndex resume, IndexResumeStates(init.resume, optimizer_name_));
  std::vector<std::vector<kv::KeyState>> per_server(servers_.size());
  std::vector<std::vector<std::vector<int>>> chains(servers_.size());  // parallel to per_server
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    kv::KeyState k;
    k.key = slice.key;
    k.shape = {slice.length};
    k.version = init.start_version;
    const float* w = params_[slice.param_index].weights + slice.offset;
    k.values.assign(w, w + slice.length);
    DTRAIN_RETURN_IF_ERROR(resume.Take(slice.key, &k.version, &k.optimizer_state));
    // Every replica starts from the same state.
    const std::vector<int>& chain = routing_->chain(i);
    for (size_t m = 1; m < chain.size(); ++m) per_server[chain[m]].push_back(k);
    per_server[chain.front()].push_back(std::move(k));
    if (options_.replication > 1) {
      for (int m : chain) chains[m].push_back(chain);
    }
  }
  DTRAIN_RETURN_IF_ERROR(resume.CheckAllUsed());
  for (size_t s = 0; s < servers_.size(); ++s) {
    DTRAIN_RETURN_IF_ERROR(servers_[s]->Configure(options_.mode, cluster_.num_workers(), init.optimizer, timeout,
                                                  options_.staleness, options_.pull_compression, init.epoch_lr));
    DTRAIN_RETURN_IF_ERROR(servers_[s]->InitKeys(per_server[s], timeout, chains[s]));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> DistKVStore::ChunkElems(const std::vector<int64_t>& sizes, const KVStoreInit& init) const {
  if (options_.max_chunk_elems > 0) return options_.max_chunk_elems;
  if (init.resume == nullptr) {
    const int64_t bound = kv::AutoChunkElems(sizes, static_cast<int>(servers_.size()));
    if (bound != kv::kMaxChunkElems && cluster_.rank() == 0) {
      DTRAIN_LOG(INFO) << "placement: parameters above " << bound << " elements are cut into keys of that many, "
                       << (kv::HasLargeTensor(sizes)
                               ? "so that each key's answer follows its pushes closely (the model has tensors "
                                 "above 1048576)"
                               : "so that no server holds over 1.25x its share of the model")
                       << " (--bigarray-bound to choose)";
    }
    return bound;
  }
  // A resume cuts the keys as its checkpoint's optimizer state was cut, whatever this
  // cluster's size: the states are per key.
  std::vector<uint64_t> keys;
  std::vector<int64_t> state_sizes;
  for (const kv::KeyState& k : init.resume->keys) {
    keys.push_back(k.key);
    state_sizes.push_back(static_cast<int64_t>(k.optimizer_state.size()));
  }
  const int64_t bound = kv::FindChunkElems(sizes, keys, state_sizes);
  if (bound == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint's optimizer state holds ", keys.size(),
                     " keys, which is not how dtrain cuts this model by itself: written for another model, or with a "
                     "--bigarray-bound of its own (pass the same)"));
  }
  return bound;
}

absl::Status DistKVStore::WaitAllServers(absl::Time deadline) {
  absl::Status first;
  for (auto& s : servers_) {
    absl::Status st = s->WaitAll(deadline);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

absl::Status DistKVStore::Settle(int64_t next_step) {
  DTRAIN_RETURN_IF_ERROR(NothingPending("Settle"));
  if (options_.mode != KVStoreMode::kDistSsp || options_.staleness == 0) return absl::OkStatus();
  // Every worker pushed every step of the epoch before it gets here, so each key
  // reaches exactly `next_step`: nobody can push step `next_step` before settling.
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    const int head = routing_->Head(i);
    if (head < 0) return NoReplicaLeft(i);
    servers_[head]->Submit(KeyRequest::Pull(slice.key, next_step, params_[slice.param_index].weights + slice.offset,
                                            slice.length, &held_versions_[i]));
  }
  return WaitAllServers(now_() + options_.sync_timeout + kClientGrace);
}

absl::StatusOr<checkpoint::OptimizerStates> DistKVStore::SaveStates() {
  DTRAIN_RETURN_IF_ERROR(NothingPending("SaveStates"));
  checkpoint::OptimizerStates out;
  out.optimizer = optimizer_name_;
  // Each key once, from the first live member of its chain; a member found gone on the
  // way leaves the chains and the round starts over (bounded: one server less each time).
  for (;;) {
    std::vector<std::vector<uint64_t>> per_server(servers_.size());
    for (size_t i = 0; i < placement_.slices.size(); ++i) {
      const int head = routing_->Head(i);
      if (head < 0) return NoReplicaLeft(i);
      per_server[head].push_back(placement_.slices[i].key);
    }
    out.keys.clear();
    bool again = false;
    for (size_t s = 0; s < servers_.size() && !again; ++s) {
      if (per_server[s].empty()) continue;
      // Without replication every server holds only its own keys: ask for all of them.
      const std::vector<uint64_t> keys = options_.replication > 1 ? per_server[s] : std::vector<uint64_t>{};
      absl::StatusOr<std::vector<kv::KeyState>> snaps = servers_[s]->GetState(keys, options_.sync_timeout);
      if (!snaps.ok() && FailOver(static_cast<int>(s), snaps.status())) {
        again = true;
        break;
      }
      if (!snaps.ok()) return snaps.status();
      for (auto& k : *snaps) out.keys.push_back(StateOnly(std::move(k)));
    }
    if (!again) return out;
  }
}

KVStoreStats DistKVStore::stats() const {
  KVStoreStats st;
  for (const auto& s : servers_) {
    st.bytes_pushed += s->bytes_pushed();
    st.bytes_pulled += s->bytes_pulled();
    st.bytes_pulled_uncompressed += s->bytes_pulled_uncompressed();
    st.bytes_pushed_uncompressed += s->bytes_pushed_uncompressed();
  }
  return st;
}
}  // namespace dtrain::worker
