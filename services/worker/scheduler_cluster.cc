#include "services/worker/scheduler_cluster.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/epoch_reports.h"

namespace dtrain::worker {

absl::StatusOr<std::unique_ptr<SchedulerCluster>> SchedulerCluster::Join(const JoinOptions& o) {
  std::unique_ptr<SchedulerCluster> c(new SchedulerCluster(o.scheduler, o));
  c->scheduler_.set_job_id(o.job_id);
  c->scheduler_.set_replication(o.replication);
  c->scheduler_.set_elastic(o.elastic);
  DTRAIN_ASSIGN_OR_RETURN(v1::RegisterResponse reg,
                          c->scheduler_.Register(v1::ROLE_WORKER, o.host, o.requested_rank, o.num_workers,
                                                 o.num_servers, o.register_timeout));
  c->rank_ = reg.rank();
  c->rejoined_ = reg.rejoined();
  c->num_workers_ = o.num_workers;
  SetLogIdentity("worker", c->rank_);
  c->num_servers_ = o.num_servers;
  DTRAIN_ASSIGN_OR_RETURN(c->servers_, ServersOf(reg.cluster(), o.num_servers));
  if (!o.elastic.empty()) DTRAIN_RETURN_IF_ERROR(c->TakeMembership(reg));
  SchedulerClient::HeartbeatHooks hooks;
  SchedulerCluster* self = c.get();  // the client (and its hooks' thread) dies with *c
  hooks.on_shutdown = [self](const std::string& reason) { self->OnJobEnded(reason); };
  hooks.on_dead = [self](const v1::NodeInfo& node) { self->OnPeerDead(node); };
  hooks.on_rejoined = [self](const v1::NodeInfo& node) { self->OnPeerRejoined(node); };
  hooks.on_rollback = [self](const v1::RollbackOrder& order) { self->OnRollback(order); };
  if (c->watch_ != nullptr) {
    hooks.on_membership = [self](const v1::MembershipState& m) { self->watch_->Update(m); };
  }
  // A job that waits for replacements (--rejoin-timeout) waits as long for a restarted
  // scheduler: on Kubernetes its pod comes back no sooner than the 10 s back-off.
  hooks.reconnect_for = std::max(hooks.reconnect_for, o.rejoin_timeout);
  c->scheduler_.StartHeartbeat(o.heartbeat_interval, std::move(hooks));
  DTRAIN_LOG(INFO) << (c->rejoined_ ? "rejoined" : "joined") << " the job " << c->scheduler_.job_id() << ": "
                   << o.num_workers << " workers, " << o.num_servers << " servers, scheduler " << o.scheduler
                   << ", incarnation " << c->scheduler_.incarnation();
  if (c->rejoined_) {
    // TODO(recovery): resume instead of initialising (docs/recovery.md, "A rejoining
    // worker resumes exactly"); the trainer reads ClusterRecovery::rejoined().
    DTRAIN_LOG(WARNING) << "this process replaces worker " << c->rank_ << " of a running job (incarnation "
                        << c->scheduler_.incarnation() << ")";
  }
  return c;
}

absl::StatusOr<std::vector<ServerEndpoint>> SchedulerCluster::ServersOf(const v1::ClusterView& view, int num_servers) {
  if (view.servers_size() != num_servers) {
    return absl::FailedPreconditionError(
        absl::StrCat("the scheduler reports ", view.servers_size(), " servers, this worker expects ", num_servers));
  }
  std::vector<ServerEndpoint> out;
  for (const auto& s : view.servers()) out.push_back({s.rank(), s.address(), s.state() == v1::NODE_STATE_DEAD});
  return out;
}

absl::StatusOr<elastic::Membership> SchedulerCluster::AwaitRank(int rank, absl::Time deadline) {
  DTRAIN_ASSIGN_OR_RETURN(elastic::Membership m, watch_->AwaitRank(rank, deadline));
  // Without an answer (a scheduler restarting, say) the registered addresses are all
  // there is; most servers are still there.
  if (absl::Status s = RefreshServers(std::max(deadline, absl::Now() + absl::Seconds(10))); !s.ok()) {
    DTRAIN_LOG(WARNING) << s.message() << "; connecting to the servers as registered";
  }
  return m;
}

absl::Status SchedulerCluster::RefreshServers(absl::Time deadline) {
  absl::StatusOr<v1::GetStatusResponse> status =
      scheduler_.GetStatus(std::max(deadline - absl::Now(), absl::Seconds(1)));
  if (!status.ok()) {
    return absl::Status(status.status().code(),
                        absl::StrCat("asking the scheduler where the servers are now: ", status.status().message()));
  }
  DTRAIN_ASSIGN_OR_RETURN(std::vector<ServerEndpoint> now, ServersOf(status->cluster(), num_servers_));
  for (size_t i = 0; i < now.size() && i < servers_.size(); ++i) {
    if (now[i].address == servers_[i].address && now[i].dead == servers_[i].dead) continue;
    DTRAIN_LOG(INFO) << "server " << now[i].rank << " is " << (now[i].dead ? "dead" : "alive") << " at "
                     << now[i].address << " now (registered: " << servers_[i].address
                     << (servers_[i].dead ? ", dead" : "") << ")";
  }
  servers_ = std::move(now);
  return absl::OkStatus();
}

absl::Status SchedulerCluster::TakeMembership(const v1::RegisterResponse& reg) {
  if (!reg.has_membership()) {
    return absl::FailedPreconditionError(
        "this worker runs an elastic job (--elastic) but the scheduler's answer carries no membership: a "
        "scheduler without --elastic, or one that predates it");
  }
  absl::StatusOr<elastic::Membership> m = elastic::MembershipFromProto(reg.membership());
  if (!m.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the scheduler's membership of this elastic job is bad: ", m.status().message()));
  }
  // Not in the latest generation: new to the job, or back in a rank a leaver or a removed
  // joiner held before (a rank ever held is no sign of a restart of it).
  const std::vector<int>& latest = m->schedule.latest().ranks;
  joiner_ = !std::binary_search(latest.begin(), latest.end(), rank_);
  watch_ = std::make_unique<MembershipWatch>(*std::move(m), [this] { return JobStatus(); });
  return absl::OkStatus();
}

void SchedulerCluster::OnPeerDead(const v1::NodeInfo& node) {
  const bool server = node.role() == v1::ROLE_SERVER;
  DTRAIN_LOG(WARNING) << "the scheduler reports " << (server ? "server " : "worker ") << node.rank() << " dead"
                      << (node.death_reason().empty() ? "" : " (" + node.death_reason() + ")");
  // Servers are not recovered (Recovery II): the scheduler fails the job for them.
  if (server || node.rank() == rank_) return;
  const absl::Time since =
      node.dead_since_unix_ms() > 0 ? absl::FromUnixMillis(node.dead_since_unix_ms()) : absl::Now();
  peers_.OnDead(node.rank(), since, node.death_reason());
  if (peers_.rejoin_timeout() <= absl::ZeroDuration()) {
    // A death is final for this worker: the step waiting on it stops now.
    const DeadPeer peer{node.rank(), since, node.death_reason()};
    absl::MutexLock lock(&mu_);
    if (job_status_.ok()) job_status_ = absl::AbortedError(PeerTracker::DeathText(peer, peers_.rejoin_timeout()));
  }
}

void SchedulerCluster::OnPeerRejoined(const v1::NodeInfo& node) {
  if (node.role() != v1::ROLE_WORKER || node.rank() == rank_) return;
  DTRAIN_LOG(WARNING) << "worker " << node.rank() << " rejoined (incarnation " << node.incarnation() << ", "
                      << node.restarts() << " restart(s))";
  peers_.OnRejoined(node.rank());
}

void SchedulerCluster::OnRollback(const v1::RollbackOrder& order) {
  absl::MutexLock lock(&mu_);
  if (order.generation() == 0) {
    // Every server snapshots: a server's death is followed by a rollback order.
    rollback_enabled_ = true;
    return;
  }
  if (order.generation() <= rollback_done_ || (rollback_ && rollback_->generation >= order.generation())) return;
  DTRAIN_LOG(WARNING) << "the scheduler orders a rollback: " << order.reason();
  rollback_ = RollbackOrder{order.generation(), order.step(), order.reason(), {}};
  for (const auto& s : order.servers()) rollback_->servers.push_back({s.rank(), s.address()});
}

std::optional<RollbackOrder> SchedulerCluster::PendingRollback() const {
  absl::MutexLock lock(&mu_);
  if (!rollback_ || rollback_->generation <= rollback_done_) return std::nullopt;
  return rollback_;
}

bool SchedulerCluster::RollbackEnabled() const {
  absl::MutexLock lock(&mu_);
  return rollback_enabled_ || rollback_.has_value();
}

void SchedulerCluster::RollbackDone(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  rollback_done_ = std::max(rollback_done_, generation);
  scheduler_.SetRollbackState(/*awaiting=*/false, rollback_done_);
}

void SchedulerCluster::AwaitingRollback(bool awaiting) {
  absl::MutexLock lock(&mu_);
  scheduler_.SetRollbackState(awaiting, rollback_done_);
}

void SchedulerCluster::OnJobEnded(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (job_status_.ok()) job_status_ = absl::AbortedError(absl::StrCat("the scheduler ended the job: ", reason));
}

absl::Status SchedulerCluster::JobStatus() const {
  absl::MutexLock lock(&mu_);
  return job_status_;
}

absl::Status SchedulerCluster::Barrier(const std::string& name, absl::Duration timeout) {
  return scheduler_.Barrier(name, v1::BARRIER_GROUP_WORKERS, timeout);
}

void SchedulerCluster::ReportProgress(int64_t step, double samples_per_sec) {
  scheduler_.SetProgress(step, samples_per_sec);
}

void SchedulerCluster::SetResuming(bool resuming) { scheduler_.SetResuming(resuming); }

void SchedulerCluster::ReportEpoch(const EpochFigures& figures) { scheduler_.SetEpochReport(ToReport(figures)); }

absl::StatusOr<std::vector<EpochFigures>> SchedulerCluster::GatherEpoch(int64_t epoch, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  absl::Time next_log = start + absl::Seconds(10);
  std::vector<EpochFigures> all;
  std::vector<int> missing;
  std::string last_error;
  while (true) {
    DTRAIN_RETURN_IF_ERROR(JobStatus());
    const absl::Duration left = deadline - absl::Now();
    absl::StatusOr<v1::GetStatusResponse> status = scheduler_.GetStatus(std::max(left, absl::Seconds(1)));
    if (status.ok()) {
      if (EpochReportsOf(*status, num_workers_, epoch, &all, &missing)) return all;
    } else {
      last_error = std::string(status.status().message());
    }
    const std::string who = missing.empty()
                                ? std::string("the scheduler (") + last_error + ")"
                                : absl::StrCat("worker", missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "));
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat("epoch %d's figures: waited %.0f s for %s", epoch,
                                                         absl::ToDoubleSeconds(absl::Now() - start), who));
    }
    if (absl::Now() >= next_log) {
      DTRAIN_LOG(INFO) << "epoch " << epoch << "'s figures: still waiting for " << who;
      next_log += absl::Seconds(10);
    }
    // Reports come with the next heartbeat at the latest (an interval), usually at once.
    absl::SleepFor(std::min(absl::Milliseconds(100), std::max(absl::ZeroDuration(), deadline - absl::Now())));
  }
}

absl::Status SchedulerCluster::Finish(bool failed, const std::string& reason) {
  return scheduler_.Leave(failed, reason);
}

}  // namespace dtrain::worker
