#include "services/worker/kv/dist_kvstore.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kv/replica_chain.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/kv/resume_states.h"

namespace dtrain::worker {

DistKVStore::DistKVStore(DistOptions options, Cluster& cluster) : options_(options), cluster_(cluster) {}

DistKVStore::~DistKVStore() = default;

absl::StatusOr<std::unique_ptr<DistKVStore>> DistKVStore::Connect(const DistOptions& options, Cluster& cluster) {
  std::unique_ptr<DistKVStore> store(new DistKVStore(options, cluster));
  DTRAIN_RETURN_IF_ERROR(store->Reconnect(cluster.servers()));
  DTRAIN_RETURN_IF_ERROR(kv::CheckReplication(options.replication, static_cast<int>(store->servers_.size())));
  DTRAIN_LOG(INFO) << "kv-store " << KVStoreModeName(options.mode) << ": connected to " << store->servers_.size()
                   << " servers" << (options.replication > 1 ? absl::StrCat(", replication ", options.replication) : "")
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
  early_step_ = -1;
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    homes.push_back(placement_.slices[i].server);
    slice_of_[placement_.slices[i].key] = i;
    slices_of_param_[placement_.slices[i].param_index].push_back(i);
  }
  routing_ = std::make_unique<ReplicaRouting>(homes, options_.replication, static_cast<int>(servers_.size()));
  compressor_ = PushCompressor(options_.compression, options_.gradient_scale);
  compressor_.Reset(placement_);
  const absl::Duration timeout = options_.sync_timeout;
  if (cluster_.rejoined()) return Rejoin(init);

  // Worker 0 configures the servers and gives every key its first value, as MXNet's
  // kv.init + set_optimizer from rank 0.
  if (cluster_.rank() == 0) DTRAIN_RETURN_IF_ERROR(ConfigureServers(init));
  DTRAIN_RETURN_IF_ERROR(cluster_.Barrier("kvstore-init", timeout));
  // Everyone (rank 0 too, for uniformity) starts from the servers' weights.
  int64_t min_version = init.start_version;
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    float* w = params_[slice.param_index].weights + slice.offset;
    servers_[routing_->chain(i).front()]->Pull(slice.key, min_version, w, slice.length);
  }
  return WaitAllServers(absl::Now() + timeout + kClientGrace);
}

absl::Status DistKVStore::Reconnect(const std::vector<ServerEndpoint>& servers) {
  if (!servers_.empty() && servers.size() != servers_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the scheduler names ", servers.size(), " servers, this worker has ", servers_.size()));
  }
  std::vector<std::unique_ptr<PsClient>> clients;
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

absl::StatusOr<std::unique_ptr<PsClient>> DistKVStore::ConnectServer(int rank, const std::string& address,
                                                                     absl::Duration timeout) {
  DTRAIN_ASSIGN_OR_RETURN(auto client, PsClient::Connect(address, rank, cluster_.rank(), timeout));
  // The server answers a stalled sync pull at sync_timeout naming the missing
  // workers; our own wait lasts a little longer so that answer arrives first.
  client->SetPullTimeout(options_.sync_timeout);
  client->SetPullCompression(options_.pull_compression);
  // Every request then carries who we are, so the servers fence the incarnation this
  // process replaced (and refuse us once we are replaced ourselves).
  client->SetIdentity(cluster_.job_id(), cluster_.incarnation());
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
                                                  options_.staleness, options_.pull_compression));
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

absl::Status DistKVStore::SubmitSlice(int64_t step, size_t i, const float* grad) {
  const auto& slice = placement_.slices[i];
  sent_[i].clear();
  const int head = routing_->Head(i);
  if (head < 0) return NoReplicaLeft(i);
  // Packed once per slice: every replica merges the same bytes.
  const PsClient::PushData data =
      compressor_.enabled() ? compressor_.Pack(i, grad, slice.length) : PsClient::PushData::Floats(grad, slice.length);
  for (int m : routing_->chain(i)) {
    if (!routing_->InChain(i, m)) continue;
    if (m == head) {
      // In dist_sync the weights a step's gradient was computed on are those of version
      // `step`, as every server of the chain holds them: the answer may be the change.
      sent_[i].push_back(
          {m,
           servers_[m]->PushPull(step, slice.key, data, params_[slice.param_index].weights + slice.offset,
                                 options_.pull_compression != kv::CompressionType::kNone),
           true});
    } else {
      sent_[i].push_back({m, servers_[m]->PushPullVersionOnly(step, slice.key, data), false});
    }
  }
  return absl::OkStatus();
}

absl::Status DistKVStore::PushEarly(int64_t step, size_t param_index, const float* grad) {
  if (param_index >= slices_of_param_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushEarly of parameter ", param_index, " of ", slices_of_param_.size()));
  }
  if (early_step_ != step) {
    early_step_ = step;
    early_sent_.assign(slices_of_param_.size(), false);
    sent_.resize(placement_.slices.size());
  }
  if (early_sent_[param_index]) return absl::OkStatus();
  early_sent_[param_index] = true;
  if (!early_logged_) {
    early_logged_ = true;
    DTRAIN_LOG(INFO) << "overlap: gradients go out from backward as they are computed (the first: parameter "
                     << param_index << " of " << params_.size() << ", at step " << step << ")";
  }
  // A pull answered early writes the parameter's weights: backward is done with them
  // (autograd hands a leaf its gradient after the node that used it has run), and in
  // dist_sync the answer needs this very push anyway.
  for (size_t i : slices_of_param_[param_index]) {
    DTRAIN_RETURN_IF_ERROR(SubmitSlice(step, i, grad + placement_.slices[i].offset));
  }
  return absl::OkStatus();
}

absl::Status DistKVStore::PushPull(int64_t step, const std::vector<const float*>& grads) {
  DTRAIN_RETURN_IF_ERROR(StartPushPull(step, grads));
  return FinishPushPull();
}

absl::Status DistKVStore::StartPushPull(int64_t step, const std::vector<const float*>& grads) {
  if (pending_step_ >= 0) {
    return absl::FailedPreconditionError(absl::StrCat("push-pull of step ", step, " started while step ", pending_step_,
                                                      "'s pulls are still outstanding"));
  }
  // What PushEarly sent for this step; the next PushEarly starts afresh whatever step it
  // is for (a rollback may come back to a step number seen before).
  const bool some_early_sent = early_step_ == step;
  std::vector<bool> early;
  if (some_early_sent) early.swap(early_sent_);
  early_step_ = -1;
  absl::Status stop = cluster_.JobStatus();
  if (stop.ok()) {
    if (std::optional<RollbackOrder> r = cluster_.PendingRollback()) stop = RollbackStatus(r->reason);
  }
  if (!stop.ok()) {
    if (some_early_sent) WaitAllServers(absl::Now()).IgnoreError();  // no answer may land after we return
    return stop;
  }
  if (grads.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushPull got ", grads.size(), " gradients for ", params_.size(), " parameters"));
  }
  const absl::Time start = absl::Now();
  sent_.resize(placement_.slices.size());
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    if (some_early_sent && early[slice.param_index]) continue;
    if (absl::Status s = SubmitSlice(step, i, grads[slice.param_index] + slice.offset); !s.ok()) {
      WaitAllServers(absl::Now()).IgnoreError();  // no answer may land after we return
      return s;
    }
  }
  pending_step_ = step;
  pending_status_ = absl::OkStatus();
  awaited_.assign(placement_.slices.size(), false);
  pending_push_ = absl::Now() - start;
  pending_wait_ = pending_pull_ = pending_rejoin_wait_ = absl::ZeroDuration();
  pending_answered_ = false;
  replica_lag_ = absl::ZeroDuration();
  return absl::OkStatus();
}

absl::Status DistKVStore::AwaitPending(size_t i) {
  if (awaited_[i] || !pending_status_.ok()) return pending_status_;
  const absl::Time t0 = absl::Now();
  const absl::Status st = AwaitSlice(i, pending_step_, &pending_rejoin_wait_);
  awaited_[i] = true;
  // Every worker sends the keys in the same order and a sync key is answered once all
  // pushes of it are in, so the first wait is mostly for the other workers; the rest is
  // mostly the weights' transfer. Only time the caller was blocked counts: with
  // StartPushPull what arrived during the next forward is hidden.
  (pending_answered_ ? pending_pull_ : pending_wait_) += absl::Now() - t0;
  pending_answered_ = true;
  if (!st.ok()) {
    // Collect what is still out, so that no answer lands in a buffer after we return.
    WaitAllServers(absl::Now()).IgnoreError();
    pending_status_ = st;
  }
  return st;
}

absl::Status DistKVStore::NothingPending(const char* what) const {
  if (pending_step_ < 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what, " while step ", pending_step_, "'s pulls are outstanding (FinishPushPull first)"));
}

absl::Status DistKVStore::AwaitParam(size_t param_index) {
  if (pending_step_ < 0) return absl::OkStatus();
  if (param_index >= slices_of_param_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("AwaitParam of parameter ", param_index, " of ", slices_of_param_.size()));
  }
  for (size_t i : slices_of_param_[param_index]) DTRAIN_RETURN_IF_ERROR(AwaitPending(i));
  return absl::OkStatus();
}

absl::Status DistKVStore::FinishPushPull() {
  if (pending_step_ < 0) return absl::OkStatus();
  for (size_t i = 0; i < placement_.slices.size() && pending_status_.ok(); ++i) AwaitPending(i).IgnoreError();
  const int64_t step = pending_step_;
  pending_step_ = -1;
  last_timing_.push = absl::ToDoubleSeconds(pending_push_);
  last_timing_.wait = absl::ToDoubleSeconds(pending_wait_);
  last_timing_.pull = absl::ToDoubleSeconds(pending_pull_);
  last_timing_.rejoin_wait = absl::ToDoubleSeconds(pending_rejoin_wait_);
  last_timing_.replica_lag = options_.replication > 1 ? absl::ToDoubleSeconds(replica_lag_) : -1;
  if (!pending_status_.ok()) return pending_status_;
  if (options_.replication > 1) ApplyJoinNotices();
  if (resuming_) {
    // The redone step is in: this rank has caught up with the job.
    resuming_ = false;
    cluster_.SetResuming(false);
    DTRAIN_LOG(WARNING) << "caught up: step " << step << " done " << absl::FormatDuration(absl::Now() - joined_)
                        << " after rejoining";
  }
  return absl::OkStatus();
}

absl::Status DistKVStore::AwaitSlice(size_t i, int64_t step, absl::Duration* rejoin_wait) {
  const auto& slice = placement_.slices[i];
  // sent_[i] may grow as we go: a failover asks the next replica for the weights.
  absl::Time weights_in = absl::InfiniteFuture();
  for (size_t j = 0; j < sent_[i].size(); ++j) {
    const absl::Status st = AwaitSent(i, j, step, rejoin_wait);
    if (st.ok() && sent_[i][j].weights) weights_in = absl::Now();
    if (st.ok()) continue;
    const Sent sent = sent_[i][j];
    if (!FailOver(sent.server, st)) return st;
    if (!sent.weights) continue;
    const int next = routing_->Head(i);
    if (next < 0) return NoReplicaLeft(i);
    // The next replica got our push with everyone else's (pushes go to every live
    // member at once); its answer so far is a version only, so ask it for the weights.
    float* w = params_[slice.param_index].weights + slice.offset;
    const int64_t version = PullVersionAfterPush(options_.mode, step, options_.staleness);
    sent_[i].push_back({next, servers_[next]->Pull(slice.key, version, w, slice.length), true});
  }
  // The weights come first in sent_[i]; what the backups' answers added after them.
  if (sent_[i].size() > 1 && weights_in != absl::InfiniteFuture()) {
    replica_lag_ = std::max(replica_lag_, absl::Now() - weights_in);
  }
  return absl::OkStatus();
}

absl::Status DistKVStore::AwaitSent(size_t i, size_t j, int64_t step, absl::Duration* rejoin_wait) {
  const auto& slice = placement_.slices[i];
  Sent& sent = sent_[i][j];
  PsClient& server = *servers_[sent.server];
  // The server answers a stalled sync pull at sync_timeout naming the missing workers;
  // our own deadline is a little later so that its answer arrives first.
  absl::Time deadline = absl::Now() + options_.sync_timeout + kClientGrace;
  absl::Time extended_since = absl::InfiniteFuture();
  for (;;) {
    // Short slices: a peer's death (with --rejoin-timeout 0) or the scheduler ending
    // the job stops the step within a second, not at the sync timeout.
    while (!server.WaitUntil(sent.ticket, std::min(deadline, absl::Now() + kJobCheckEvery))) {
      if (absl::Status job = cluster_.JobStatus(); !job.ok()) return job;
      if (std::optional<RollbackOrder> r = cluster_.PendingRollback()) return RollbackStatus(r->reason);
      if (absl::Now() >= deadline) break;
    }
    absl::Status st = server.Wait(sent.ticket, deadline);
    if (extended_since != absl::InfiniteFuture()) *rejoin_wait += absl::Now() - extended_since;
    if (st.ok()) return st;
    if (!absl::IsDeadlineExceeded(st)) {
      // With replicas a broken stream is a failover (AwaitSlice asks the next member),
      // not a lost shard to roll back from.
      if (options_.replication > 1 && absl::IsUnavailable(st)) return st;
      return AwaitRollback(st);
    }
    // The step waited its full sync timeout. If that is because a worker died and may
    // still be replaced (--rejoin-timeout), wait again: the pushes are in, so only the
    // pull is asked again (the server dropped its parked one with its answer).
    DTRAIN_ASSIGN_OR_RETURN(const bool extend, cluster_.ExtendWaitForRejoin());
    if (!extend || IsAsync(options_.mode)) return st;
    if (absl::Status job = cluster_.JobStatus(); !job.ok()) return job;
    extended_since = absl::Now();
    const int64_t version = PullVersionAfterPush(options_.mode, step, options_.staleness);
    sent.ticket = sent.weights
                      ? server.Pull(slice.key, version, params_[slice.param_index].weights + slice.offset, slice.length)
                      : server.PullVersionOnly(slice.key, version);
    deadline = absl::Now() + options_.sync_timeout + kClientGrace;
  }
}

void DistKVStore::ApplyJoinNotices() {
  for (size_t s = 0; s < servers_.size(); ++s) {
    for (const PsClient::JoinNotice& n : servers_[s]->TakeJoinNotices()) {
      auto it = slice_of_.find(n.key);
      if (it == slice_of_.end() || n.server < 0 || n.server >= static_cast<int>(servers_.size())) continue;
      const size_t i = it->second;
      const std::vector<int>& chain = routing_->chain(i);
      if (std::find(chain.begin(), chain.end(), n.server) == chain.end() || routing_->InChain(i, n.server)) continue;
      if (!routing_->Alive(n.server)) {
        // The restarted process listens elsewhere (a new port): connect to it. It answered
        // its partner's copy a moment ago, so it is up or gone again; a restart after
        // that one sends its own notice. So not the start-up --connect-timeout (2 min),
        // for which the step would stall on a dead address while the keys' partners serve.
        absl::StatusOr<std::unique_ptr<PsClient>> client =
            ConnectServer(n.server, n.address, std::min(options_.connect_timeout, kRejoinConnectTimeout));
        if (!client.ok()) {
          DTRAIN_LOG(WARNING) << "server " << n.server << " is back at " << n.address
                              << " but cannot be reached: " << client.status().message();
          continue;
        }
        servers_[n.server] = std::move(*client);
        DTRAIN_LOG(WARNING) << "server " << n.server << " restarted at " << n.address
                            << "; it rejoins the replica chains as its keys are copied to it";
      }
      routing_->Join(i, n.server);
      DTRAIN_LOG(INFO) << "server " << n.server << " is back in the chain of key " << n.key << " from version "
                       << n.version;
    }
  }
}

bool DistKVStore::FailOver(int server, const absl::Status& st) {
  // UNAVAILABLE: the stream broke or the server cannot be reached. Anything else (a
  // fence, a refused push) is an answer, not a death.
  if (options_.replication <= 1 || !absl::IsUnavailable(st)) return false;
  MarkDead(server, st);
  return true;
}

void DistKVStore::MarkDead(int server, const absl::Status& why) {
  const std::string text = why.message().empty() ? absl::StatusCodeToString(why.code()) : std::string(why.message());
  if (!routing_->MarkDead(server, text)) return;
  DTRAIN_LOG(WARNING) << "failover: server " << server << " at " << servers_[server]->address()
                      << " left the replica chains (" << text << "); " << routing_->live_servers() << " of "
                      << servers_.size() << " servers serve the keys";
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
  std::vector<int64_t> pulled(placement_.slices.size(), -1);
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    const int head = routing_->Head(i);
    if (head < 0) return NoReplicaLeft(i);
    servers_[head]->Pull(slice.key, next_step, params_[slice.param_index].weights + slice.offset, slice.length,
                         &pulled[i]);
  }
  return WaitAllServers(absl::Now() + options_.sync_timeout + kClientGrace);
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
