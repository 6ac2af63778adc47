// DistKVStore's recovery (KVStore::recovery(): RecoveryPart, dist_kvstore.h): a process
// that replaced a dead worker finding the step to redo (Rejoin, from the servers'
// versions), and the whole job going back to the servers' snapshots (Rollback). The
// step pipeline is in dist_kvstore_step.cc, failover in dist_kvstore_failover.cc.
#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kv/replica_chain.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/kv/dist_kvstore.h"
#include "services/worker/kv/resume_states.h"

namespace dtrain::worker {

std::optional<RollbackOrder> DistKVStore::PendingRollback() const {
  if (cluster_recovery_ == nullptr) return std::nullopt;
  return cluster_recovery_->PendingRollback();
}

absl::StatusOr<int64_t> DistKVStore::Rollback() {
  // A failed step still pending (the one the order stopped) is over: nothing of it is
  // kept, and its handle's waits fail FAILED_PRECONDITION from now on.
  if (pending_step_ >= 0) FinishPending(pending_id_, absl::InfiniteFuture()).IgnoreError();
  std::fill(held_versions_.begin(), held_versions_.end(), -1);
  const std::optional<RollbackOrder> order = PendingRollback();
  if (!order) return absl::FailedPreconditionError("Rollback without a rollback order from the scheduler");
  if (!StepsAreExact(options_.mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(order->reason, ": ", KVStoreModeName(options_.mode), " cannot roll back (no common step)"));
  }
  const int64_t t = order->step;
  compressor_.Reset(placement_);
  // Every server reloaded step t before the scheduler told us. A restarted server is a
  // new process: the old streams (to it, and those a live server failed) are done.
  WaitAllServers(now_()).IgnoreError();
  std::vector<ServerEndpoint> servers = order->servers;
  if (servers.empty()) {  // an order without addresses: the servers kept theirs
    for (const auto& s : servers_) servers.push_back({static_cast<int>(servers.size()), s->address()});
  }
  DTRAIN_RETURN_IF_ERROR(Reconnect(servers));
  std::vector<int64_t> pulled(placement_.slices.size(), -1);
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    servers_[slice.server]->Submit(KeyRequest::PullExact(
        slice.key, t, params_[slice.param_index].weights + slice.offset, slice.length, &pulled[i]));
  }
  DTRAIN_RETURN_IF_ERROR(WaitAllServers(now_() + options_.sync_timeout + kClientGrace));
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    if (pulled[i] == t) continue;
    return absl::FailedPreconditionError(absl::StrCat("rolling back to step ", t, ": key ", placement_.slices[i].key,
                                                      " came back at version ", pulled[i]));
  }
  cluster_recovery_->RollbackDone(order->generation);  // an order came from it
  resume_step_ = t;
  DTRAIN_LOG(WARNING) << order->reason << ": worker " << cluster_.rank() << " pulled the weights of step " << t
                      << " and redoes the steps from there";
  return t;
}

absl::Status DistKVStore::AwaitRollback(const absl::Status& error) {
  // What a rollback looks like from here: the server's stream broke (it died), a
  // parked pull was failed by a server that reloaded (ABORTED), or a push of a step
  // the reloaded server is not at yet (FAILED_PRECONDITION).
  const absl::StatusCode code = error.code();
  const bool may_be_rollback = code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kAborted ||
                               code == absl::StatusCode::kCancelled || code == absl::StatusCode::kFailedPrecondition;
  if (!StepsAreExact(options_.mode) || !may_be_rollback) return error;
  if (cluster_recovery_ == nullptr || !cluster_recovery_->RollbackEnabled()) return error;
  const absl::Time deadline = now_() + options_.sync_timeout;
  bool logged = false;
  cluster_recovery_->AwaitingRollback(true);
  absl::Cleanup done_waiting = [this] { cluster_recovery_->AwaitingRollback(false); };
  while (now_() < deadline) {
    if (std::optional<RollbackOrder> r = PendingRollback()) return RollbackStatus(r->reason);
    if (absl::Status job = cluster_.JobStatus(); !job.ok()) return job;
    if (!logged) {
      DTRAIN_LOG(WARNING) << error.message() << ": waiting up to " << absl::FormatDuration(options_.sync_timeout)
                          << " for the scheduler to roll the job back to the servers' snapshots";
      logged = true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return error;
}

absl::StatusOr<DistKVStore::Versions> DistKVStore::FetchVersions() {
  Versions out;
  std::vector<absl::flat_hash_map<uint64_t, int64_t>> held(servers_.size());
  for (size_t s = 0; s < servers_.size(); ++s) {
    if (!routing_->Alive(static_cast<int>(s))) continue;
    absl::StatusOr<std::vector<kv::KeyVersion>> got = servers_[s]->GetVersions({}, options_.sync_timeout);
    if (!got.ok() && FailOver(static_cast<int>(s), got.status())) continue;
    if (!got.ok()) return got.status();
    for (const kv::KeyVersion& v : *got) {
      held[s][v.key] = v.version;
      // Replicas may stand one step apart (one merged the step, another waits for a
      // push): the lower version is the step nobody finished.
      auto it = out.find(v.key);
      if (it == out.end() || v.version < it->second.version) out[v.key] = v;
    }
  }
  if (options_.replication > 1) {
    // A member that lacks a key another member holds was restarted empty: it is not in
    // that key's chain until a partner copied the key to it (docs/recovery.md).
    for (size_t i = 0; i < placement_.slices.size(); ++i) {
      const uint64_t key = placement_.slices[i].key;
      if (!out.contains(key)) continue;
      for (int m : routing_->chain(i)) {
        if (routing_->InChain(i, m) && !held[m].contains(key)) routing_->LeaveChain(i, m);
      }
    }
  }
  return out;
}

std::string DistKVStore::MissingKeys(const Versions& versions) const {
  int missing = 0;
  std::string first;
  for (const auto& slice : placement_.slices) {
    if (versions.contains(slice.key)) continue;
    if (missing++ == 0) {
      first = absl::StrCat("key ", slice.key, " on server ", slice.server, " at ", servers_[slice.server]->address());
    }
  }
  if (missing == 0) return "";
  return absl::StrCat(missing, " of ", placement_.slices.size(), " keys, first ", first);
}

bool DistKVStore::InitRoundPassed(const Versions& versions, int64_t start_version) {
  for (const auto& [key, v] : versions) {
    if (v.version > start_version || v.last_push_step >= start_version) return true;
  }
  return false;
}

absl::Status DistKVStore::Rejoin(const KVStoreInit& init) {
  const absl::Duration timeout = options_.sync_timeout;
  joined_ = now_();
  resuming_ = true;
  std::fill(held_versions_.begin(), held_versions_.end(), -1);
  cluster_recovery_->SetResuming(true);  // Init rejoins only where the recovery part said so
  // GetVersions also fences the incarnation we replace, before our first push.
  DTRAIN_ASSIGN_OR_RETURN(Versions versions, FetchVersions());
  const std::string missing = MissingKeys(versions);
  if (!missing.empty()) {
    // The job died in its start-up: worker 0 had not given every key its value yet.
    DTRAIN_LOG(WARNING) << "rejoining during start-up: the servers do not hold " << missing << " yet";
    if (cluster_.rank() == 0) DTRAIN_RETURN_IF_ERROR(ConfigureServers(init));
  }
  // The scheduler lets this call through at once when our predecessor passed the
  // barrier already, and counts us in its round when it had not. A scheduler that
  // restarted since (it died with our predecessor) no longer knows; the servers do:
  // a key that moved past the start, or a push of our rank they accepted, means the
  // round completed for everyone (a round completes only when all have arrived), so
  // nobody waits there for us.
  if (!missing.empty() || !InitRoundPassed(versions, init.start_version)) {
    DTRAIN_RETURN_IF_ERROR(cluster_.Barrier("kvstore-init", timeout));
  }
  if (!missing.empty()) {
    DTRAIN_ASSIGN_OR_RETURN(versions, FetchVersions());
    if (const std::string still = MissingKeys(versions); !still.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("rejoining: the servers still do not hold ", still, " after the init barrier (another model?)"));
    }
  }

  int64_t t = -1;
  if (!StepsAreExact(options_.mode)) {
    // No common step (async, SSP): go on after the last step of ours every key accepted. Pushes the
    // servers already hold are ignored when resent, so none counts twice.
    for (const auto& slice : placement_.slices) {
      const int64_t next = std::max(versions[slice.key].last_push_step + 1, init.start_version);
      if (t < 0 || next < t) t = next;
    }
  } else {
    // In dist_sync a key is at t+1 once every worker's step-t push of it merged, so the
    // step nobody can have finished is the lowest version: redo it. No key can move
    // past t+1 meanwhile, since the others wait for our step-t pushes.
    for (const auto& slice : placement_.slices) {
      const int64_t v = versions[slice.key].version;
      if (t < 0 || v < t) t = v;
    }
  }
  // Exactly version t of every key: a key whose step t already merged (at t+1) is
  // answered from the previous version its server keeps, so the redone gradients are
  // bit-identical to the dead worker's.
  std::vector<int64_t> pulled(placement_.slices.size(), -1);
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    float* w = params_[slice.param_index].weights + slice.offset;
    const int head = routing_->Head(i);
    if (head < 0) return NoReplicaLeft(i);
    if (!StepsAreExact(options_.mode)) {
      servers_[head]->Submit(KeyRequest::Pull(slice.key, 0, w, slice.length, &pulled[i]));  // the current weights
    } else {
      servers_[head]->Submit(KeyRequest::PullExact(slice.key, t, w, slice.length, &pulled[i]));
    }
  }
  DTRAIN_RETURN_IF_ERROR(WaitAllServers(now_() + timeout + kClientGrace));
  for (size_t i = 0; i < placement_.slices.size() && StepsAreExact(options_.mode); ++i) {
    if (pulled[i] == t) continue;
    const auto& slice = placement_.slices[i];
    const int head = routing_->Head(i);
    return absl::FailedPreconditionError(
        absl::StrCat("rejoining at step ", t, ": server ", head, " at ", servers_[head]->address(),
                     " answered the exact pull of key ", slice.key, " version ", t, " with version ", pulled[i],
                     " (a dtrain-server without exact pulls?); redoing the step from it would not be bit-exact"));
  }
  resume_step_ = t;
  DTRAIN_LOG(WARNING) << "rejoined the job as worker " << cluster_.rank() << " incarnation "
                      << cluster_recovery_->incarnation() << ": "
                      << (StepsAreExact(options_.mode) ? "redoing step " : "going on at step ") << t;
  return absl::OkStatus();
}

absl::Status DistKVStore::JoinAt(int64_t step) {
  // With replication a server restarted since the job started holds a key only once a
  // partner copied it, and the workers count it in the key's chain from then on. As a
  // replacement worker does (Rejoin), leave out of a chain a member lacking the key (and
  // a dead one); the pulls then come from members that hold it.
  // A joiner whose model is not the job's (another --network, other hidden sizes) would
  // fail on its first pull, or push keys nobody else has; the job's keys tell.
  DTRAIN_ASSIGN_OR_RETURN(const Versions versions, FetchVersions());
  DTRAIN_RETURN_IF_ERROR(CheckJoinerKeys(versions, step));
  // The servers are configured and the others passed the init barrier long ago; keys are
  // at most at `step` (that step waits for this worker's push), so the pull waits as
  // any pull does until the generation before has merged it.
  std::vector<int64_t> pulled(placement_.slices.size(), -1);
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    const int head = routing_->Head(i);
    if (head < 0) return NoReplicaLeft(i);
    servers_[head]->Submit(KeyRequest::PullExact(slice.key, step, params_[slice.param_index].weights + slice.offset,
                                                 slice.length, &pulled[i]));
  }
  if (absl::Status s = WaitAllServers(now_() + options_.sync_timeout + kClientGrace); !s.ok()) {
    // The likeliest cause of a pull that does not fit the key: a key of the job's model
    // with the same number as one of ours but another size.
    return absl::Status(s.code(), absl::StrCat("joining the running job at step ", step, ": ", s.message(),
                                               " (a joiner must train the job's model: the same --network, hidden "
                                               "sizes and --bigarray-bound as the job's workers)"));
  }
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    if (pulled[i] == step) continue;
    return absl::FailedPreconditionError(absl::StrCat("joining at step ", step, ": key ", placement_.slices[i].key,
                                                      " came back at version ", pulled[i]));
  }
  if (options_.replication > 1) DTRAIN_RETURN_IF_ERROR(TakeBackCopiedMembers(step));
  resume_step_ = step;
  return absl::OkStatus();
}

absl::Status DistKVStore::CheckJoinerKeys(const Versions& versions, int64_t step) const {
  const std::string missing = MissingKeys(versions);
  int extra = 0;
  uint64_t first_extra = 0;
  for (const auto& [key, v] : versions) {
    if (slice_of_.contains(key)) continue;
    if (extra++ == 0 || key < first_extra) first_extra = key;
  }
  if (missing.empty() && extra == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "joining the running job at step ", step, ": this worker's model is not the job's: its ",
      placement_.slices.size(), " keys against the servers' ", versions.size(),
      missing.empty() ? "" : absl::StrCat("; the servers lack ", missing),
      extra == 0 ? "" : absl::StrCat("; this model lacks ", extra, " of the servers' keys, first key ", first_extra),
      " (a joiner must train the job's model: the same --network, hidden sizes and --bigarray-bound as the job's "
      "workers)"));
}

absl::Status DistKVStore::TakeBackCopiedMembers(int64_t step) {
  for (size_t s = 0; s < servers_.size(); ++s) {
    const int server = static_cast<int>(s);
    std::vector<size_t> left_out;
    for (size_t i = 0; i < placement_.slices.size(); ++i) {
      const std::vector<int>& chain = routing_->chain(i);
      if (std::find(chain.begin(), chain.end(), server) != chain.end() && !routing_->InChain(i, server)) {
        left_out.push_back(i);
      }
    }
    if (left_out.empty() || !routing_->Alive(server)) continue;
    absl::StatusOr<std::vector<kv::KeyVersion>> got = servers_[s]->GetVersions({}, options_.sync_timeout);
    if (!got.ok() && FailOver(server, got.status())) continue;
    if (!got.ok()) return got.status();
    absl::flat_hash_map<uint64_t, int64_t> held;
    for (const kv::KeyVersion& v : *got) held[v.key] = v.version;
    for (size_t i : left_out) {
      const uint64_t key = placement_.slices[i].key;
      if (!held.contains(key) || !routing_->Join(i, server)) continue;
      DTRAIN_LOG(INFO) << "server " << server << " holds key " << key << " again (copied at version " << held[key]
                       << " or before): in its chain from step " << step;
    }
  }
  return absl::OkStatus();
}

}  // namespace dtrain::worker
