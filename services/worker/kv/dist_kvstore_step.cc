// DistKVStore's step pipeline: a step's slices sent (all at once, or parameter by
// parameter from backward through EarlyStep::Offer), then their answers awaited slice
// by slice, failing over to the next replica where a server is gone. The state it owns
// is the pending step's: sent_, awaited_ and pending_*.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/kv/dist_kvstore.h"
#include "services/worker/kv/membership_status.h"

namespace dtrain::worker {

absl::Status DistKVStore::SubmitSlice(int64_t step, size_t i, const float* grad) {
  const auto& slice = placement_.slices[i];
  sent_[i].clear();
  const int head = routing_->Head(i);
  if (head < 0) return NoReplicaLeft(i);
  const int64_t lag = StaleLag(step, i);
  // Packed once per slice: every replica merges the same bytes.
  const PushData data =
      compressor_.enabled() ? compressor_.Pack(i, grad, slice.length) : PushData::Floats(grad, slice.length);
  for (int m : routing_->chain(i)) {
    if (!routing_->InChain(i, m)) continue;
    // In dist_sync the weights a step's gradient was computed on are those of version
    // `step`, as every server of the chain holds them: the head's answer may be the change.
    KeyRequest request =
        m == head ? KeyRequest::PushPull(step, slice.key, data, params_[slice.param_index].weights + slice.offset,
                                         options_.pull_compression != kv::CompressionType::kNone)
                  : KeyRequest::PushPullVersionOnly(step, slice.key, data);
    request.membership_generation = membership_generation_;
    request.lag = lag;
    if (m == head) request.version_out = &held_versions_[i];
    sent_[i].push_back({m, servers_[m]->Submit(request), m == head, request});
  }
  return absl::OkStatus();
}

int64_t DistKVStore::StaleLag(int64_t step, size_t i) const {
  if (options_.mode != KVStoreMode::kDistSsp || !options_.weigh_stale) return 0;
  const int64_t held = held_versions_[i];
  // Unknown (-1: nothing pulled since a start, rejoin or rollback) counts as fresh; a
  // lag beyond the staleness cannot be (the last pull waited for staleness), so a
  // version from before a failover is not taken for more.
  if (held < 0 || held >= step) return 0;
  return std::min<int64_t>(step - held, options_.staleness);
}

absl::Status DistKVStore::OfferEarly(int64_t step, size_t param_index, const float* grad, std::vector<bool>* offered) {
  if (param_index >= slices_of_param_.size() || param_index >= offered->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Offer of parameter ", param_index, " of ", slices_of_param_.size()));
  }
  // The pending step's tickets are in sent_, which a submit overwrites.
  DTRAIN_RETURN_IF_ERROR(NothingPending("Offer"));
  sent_.resize(placement_.slices.size());
  if ((*offered)[param_index]) return absl::OkStatus();
  (*offered)[param_index] = true;
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

absl::Status DistKVStore::SendStep(int64_t step, const std::vector<bool>& offered,
                                   const std::vector<const float*>& grads) {
  if (pending_step_ >= 0) {
    return absl::FailedPreconditionError(absl::StrCat("push-pull of step ", step, " started while step ", pending_step_,
                                                      "'s pulls are still outstanding"));
  }
  const bool some_early_sent = std::find(offered.begin(), offered.end(), true) != offered.end();
  absl::Status stop = cluster_.JobStatus();
  if (stop.ok()) {
    if (std::optional<RollbackOrder> r = PendingRollback()) stop = RollbackStatus(r->reason);
  }
  if (!stop.ok()) {
    if (some_early_sent) WaitAllServers(now_()).IgnoreError();  // no answer may land after we return
    return stop;
  }
  if (grads.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushPull got ", grads.size(), " gradients for ", params_.size(), " parameters"));
  }
  const absl::Time start = now_();
  sent_.resize(placement_.slices.size());
  for (size_t i = 0; i < placement_.slices.size(); ++i) {
    const auto& slice = placement_.slices[i];
    if (some_early_sent && offered[slice.param_index]) continue;
    if (absl::Status s = SubmitSlice(step, i, grads[slice.param_index] + slice.offset); !s.ok()) {
      WaitAllServers(now_()).IgnoreError();  // no answer may land after we return
      return s;
    }
  }
  pending_step_ = step;
  ++pending_id_;
  pending_status_ = absl::OkStatus();
  awaited_.assign(placement_.slices.size(), false);
  pending_push_ = now_() - start;
  pending_wait_ = pending_pull_ = pending_rejoin_wait_ = absl::ZeroDuration();
  pending_answered_ = false;
  replica_lag_ = absl::ZeroDuration();
  return absl::OkStatus();
}

absl::Status DistKVStore::AwaitPending(size_t i, absl::Time deadline) {
  if (awaited_[i] || !pending_status_.ok()) return pending_status_;
  const absl::Time t0 = now_();
  const absl::Status st = AwaitSlice(i, pending_step_, &pending_rejoin_wait_, deadline);
  awaited_[i] = true;
  // Every worker sends the keys in the same order and a sync key is answered once all
  // pushes of it are in, so the first wait is mostly for the other workers; the rest is
  // mostly the weights' transfer. Only time the caller was blocked counts: what arrived
  // while the caller did something else before waiting (the next forward) is hidden.
  (pending_answered_ ? pending_pull_ : pending_wait_) += now_() - t0;
  pending_answered_ = true;
  if (!st.ok()) {
    // Collect what is still out, so that no answer lands in a buffer after we return.
    WaitAllServers(now_()).IgnoreError();
    pending_status_ = st;
  }
  return st;
}

absl::Status DistKVStore::MissedDeadline(size_t i, int server) const {
  const auto& slice = placement_.slices[i];
  size_t out = 0;
  std::set<int> servers;
  for (size_t k = 0; k < placement_.slices.size(); ++k) {
    if (awaited_[k]) continue;
    ++out;
    for (const Sent& s : sent_[k]) servers.insert(s.server);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("step ", pending_step_, ": parameter ", slice.param_index, " (", params_[slice.param_index].name,
                   ") not in by the deadline: key ", slice.key, " unanswered by server ", server, " at ",
                   servers_[server]->address(), "; ", out, " of ", placement_.slices.size(),
                   " keys of the step still out, on servers ", absl::StrJoin(servers, ", ")));
}

absl::Status DistKVStore::NothingPending(const char* what) const {
  if (pending_step_ < 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what, " while step ", pending_step_, "'s pulls are outstanding (wait on its PendingStep first)"));
}

absl::Status DistKVStore::CheckPending(uint64_t id) const {
  if (pending_step_ >= 0 && id == pending_id_) return absl::OkStatus();
  return absl::FailedPreconditionError("the step of this PendingStep was ended by the store (a rollback)");
}

absl::Status DistKVStore::AwaitPendingParam(uint64_t id, size_t param_index, absl::Time deadline) {
  DTRAIN_RETURN_IF_ERROR(CheckPending(id));
  if (param_index >= slices_of_param_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("WaitParam of parameter ", param_index, " of ", slices_of_param_.size()));
  }
  for (size_t i : slices_of_param_[param_index]) DTRAIN_RETURN_IF_ERROR(AwaitPending(i, deadline));
  return absl::OkStatus();
}

absl::Status DistKVStore::FinishPending(uint64_t id, absl::Time deadline) {
  DTRAIN_RETURN_IF_ERROR(CheckPending(id));
  for (size_t i = 0; i < placement_.slices.size() && pending_status_.ok(); ++i) {
    AwaitPending(i, deadline).IgnoreError();
  }
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
    if (cluster_recovery_ != nullptr) cluster_recovery_->SetResuming(false);
    DTRAIN_LOG(WARNING) << "caught up: step " << step << " done " << absl::FormatDuration(now_() - joined_)
                        << " after rejoining";
  }
  return absl::OkStatus();
}

absl::Status DistKVStore::AwaitSlice(size_t i, int64_t step, absl::Duration* rejoin_wait, absl::Time deadline) {
  const auto& slice = placement_.slices[i];
  // sent_[i] may grow as we go: a failover asks the next replica for the weights.
  absl::Time weights_in = absl::InfiniteFuture();
  for (size_t j = 0; j < sent_[i].size(); ++j) {
    const absl::Status st = AwaitSent(i, j, step, rejoin_wait, deadline);
    if (st.ok() && sent_[i][j].weights) weights_in = now_();
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
    const KeyRequest pull = KeyRequest::Pull(slice.key, version, w, slice.length);
    sent_[i].push_back({next, servers_[next]->Submit(pull), true, pull});
  }
  // The weights come first in sent_[i]; what the backups' answers added after them.
  if (sent_[i].size() > 1 && weights_in != absl::InfiniteFuture()) {
    replica_lag_ = std::max(replica_lag_, now_() - weights_in);
  }
  return absl::OkStatus();
}

absl::Status DistKVStore::AwaitSent(size_t i, size_t j, int64_t step, absl::Duration* rejoin_wait,
                                    absl::Time caller_deadline) {
  const auto& slice = placement_.slices[i];
  Sent& sent = sent_[i][j];
  ServerChannel& server = *servers_[sent.server];
  // The server answers a stalled sync pull at sync_timeout naming the missing workers;
  // our own deadline is a little later so that its answer arrives first.
  absl::Time deadline = now_() + options_.sync_timeout + kClientGrace;
  absl::Time extended_since = absl::InfiniteFuture();
  absl::Time held_since = absl::InfiniteFuture();  // a membership change holds the push
  uint64_t held_attempts = 0;
  for (;;) {
    // The caller's deadline, where it comes first, ends the wait with our own error.
    const absl::Time until = std::min(deadline, caller_deadline);
    bool answered = false;
    // Short slices: a peer's death (with --rejoin-timeout 0) or the scheduler ending
    // the job stops the step within a second, not at the sync timeout.
    while (!(answered = server.WaitUntil(sent.ticket, std::min(until, now_() + kJobCheckEvery)))) {
      if (absl::Status job = cluster_.JobStatus(); !job.ok()) return job;
      if (std::optional<RollbackOrder> r = PendingRollback()) return RollbackStatus(r->reason);
      if (now_() >= until) break;
    }
    if (!answered && until < deadline) {
      if (extended_since != absl::InfiniteFuture()) *rejoin_wait += now_() - extended_since;
      return MissedDeadline(i, sent.server);
    }
    absl::Status st = server.Wait(sent.ticket, deadline);
    if (extended_since != absl::InfiniteFuture()) *rejoin_wait += now_() - extended_since;
    if (st.ok()) return st;
    if (options_.elastic && IsMembershipPending(st)) {
      DTRAIN_RETURN_IF_ERROR(SubmitHeldAgain(i, j, step, st, caller_deadline, &held_since, &held_attempts));
      deadline = now_() + options_.sync_timeout + kClientGrace;
      continue;
    }
    if (options_.elastic && IsMembershipChangeAnswer(st))
      return MembershipChangedStatus(step, std::string(st.message()));
    if (!absl::IsDeadlineExceeded(st)) {
      // With replicas a broken stream is a failover (AwaitSlice asks the next member),
      // not a lost shard to roll back from.
      if (options_.replication > 1 && absl::IsUnavailable(st)) return st;
      return AwaitRollback(st);
    }
    // The step waited its full sync timeout. If that is because a worker died and may
    // still be replaced (--rejoin-timeout), wait again: the pushes are in, so only the
    // pull is asked again (the server dropped its parked one with its answer).
    // Without a recovery part no dead worker is known: the wait is over.
    if (cluster_recovery_ == nullptr) return st;
    DTRAIN_ASSIGN_OR_RETURN(const bool extend, cluster_recovery_->ExtendWaitForRejoin());
    if (!extend || IsAsync(options_.mode)) return st;
    if (absl::Status job = cluster_.JobStatus(); !job.ok()) return job;
    extended_since = now_();
    const int64_t version = PullVersionAfterPush(options_.mode, step, options_.staleness);
    sent.ticket =
        server.Submit(sent.weights ? KeyRequest::Pull(slice.key, version,
                                                      params_[slice.param_index].weights + slice.offset, slice.length)
                                   : KeyRequest::PullVersionOnly(slice.key, version));
    deadline = now_() + options_.sync_timeout + kClientGrace;
  }
}

absl::Status DistKVStore::SubmitHeldAgain(size_t i, size_t j, int64_t step, const absl::Status& held,
                                          absl::Time caller_deadline, absl::Time* held_since, uint64_t* attempts) {
  const absl::Time now = now_();
  if (*held_since == absl::InfiniteFuture()) {
    *held_since = now;
    DTRAIN_LOG(INFO) << "step " << step << ": " << held.message() << "; sending the push again until it is taken";
  }
  const absl::Time until = std::min(*held_since + options_.sync_timeout, caller_deadline);
  const Sent& sent = sent_[i][j];
  if (now >= until) {
    return absl::DeadlineExceededError(
        absl::StrCat("step ", step, ": the push of key ", placement_.slices[i].key, " to server ", sent.server, " at ",
                     servers_[sent.server]->address(), " was held ",
                     absl::FormatDuration(absl::Trunc(now - *held_since, absl::Milliseconds(100))), " (", *attempts + 1,
                     " tries) by a membership change that did not commit: ", held.message()));
  }
  const uint64_t salt = (static_cast<uint64_t>(cluster_.rank()) << 32) ^ placement_.slices[i].key;
  absl::SleepFor(std::min(HeldPushPause((*attempts)++, salt), until - now));
  sent_[i][j].ticket = servers_[sent.server]->Submit(sent.request);
  return absl::OkStatus();
}

}  // namespace dtrain::worker
