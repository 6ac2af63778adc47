// Cluster over the scheduler (dtrain-scheduler): Join registers and blocks until the
// job is complete, then keeps a heartbeat stream open; the scheduler's "job over"
// answer is what JobStatus reports.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/scheduler_client.h"
#include "services/worker/cluster.h"
#include "services/worker/cluster_elastic.h"
#include "services/worker/cluster_recovery.h"
#include "services/worker/membership_watch.h"
#include "services/worker/peer_tracker.h"
#include "common/defaults.h"

namespace dtrain::worker {

struct JoinOptions {
  std::string scheduler;  // host:port
  int num_workers = 1;
  int num_servers = 1;
  int replication = 1;             // --replication, checked by the scheduler
  int requested_rank = -1;         // -1: any
  std::string host = "127.0.0.1";  // advertised to the scheduler
  absl::Duration register_timeout = absl::Seconds(kDefaultRegisterTimeoutSeconds);
  absl::Duration heartbeat_interval = absl::Seconds(kDefaultHeartbeatIntervalSeconds);
  // How long a dead worker may take to rejoin before this one fails (0: at once,
  // naming it). The scheduler's own --rejoin-timeout fails the whole job likewise.
  absl::Duration rejoin_timeout = absl::ZeroDuration();
  // How often an extended wait logs whom it waits for.
  absl::Duration rejoin_log_every = absl::Seconds(10);
  std::string job_id;        // empty: the scheduler's
  std::string cluster_spec;  // --cluster-spec, sent when registering; "" for none
  // --elastic as "MIN:MAX" ("" for a job that is not elastic): sent when registering; the
  // scheduler's answer then carries the job's membership, which must parse.
  std::string elastic;
};

// Its own recovery part: the scheduler tells of rejoins, dead peers and rollbacks; and,
// in an elastic job, its elastic part: the membership from the heartbeats.
class SchedulerCluster final : public Cluster, public ClusterRecovery, public ClusterElastic {
 public:
  // Registers as a worker (blocking until every node registered, or the register
  // timeout, whose error names who is missing) and starts the heartbeat.
  static absl::StatusOr<std::unique_ptr<SchedulerCluster>> Join(const JoinOptions& options);

  int rank() const override { return rank_; }
  int num_workers() const override { return num_workers_; }
  const std::vector<ServerEndpoint>& servers() const override { return servers_; }
  absl::Status Barrier(const std::string& name, absl::Duration timeout) override;
  void ReportProgress(int64_t step, double samples_per_sec) override;
  absl::Status JobStatus() const override;
  absl::Status Finish(bool failed, const std::string& reason) override;
  void ReportEpoch(const EpochFigures& figures) override;
  // Polls GetStatus until every worker's report is there (epoch_reports.h).
  absl::StatusOr<std::vector<EpochFigures>> GatherEpoch(int64_t epoch, absl::Duration timeout) override;
  ClusterRecovery* recovery() override { return this; }

  bool rejoined() const override { return rejoined_; }
  void SetResuming(bool resuming) override;
  std::vector<DeadPeer> DeadPeers() const override { return peers_.DeadPeers(); }
  absl::StatusOr<bool> ExtendWaitForRejoin() override { return peers_.ExtendWait(absl::Now()); }
  uint64_t incarnation() const override { return scheduler_.incarnation(); }
  std::string job_id() const override { return scheduler_.job_id(); }
  std::optional<RollbackOrder> PendingRollback() const override;
  void RollbackDone(uint64_t generation) override;
  void AwaitingRollback(bool awaiting) override;
  bool RollbackEnabled() const override;

  ClusterElastic* elastic() override { return watch_ != nullptr ? this : nullptr; }
  elastic::Membership membership() const override { return watch_->current(); }
  absl::StatusOr<elastic::Membership> AwaitGenerations(int generations, absl::Time deadline) override {
    return watch_->AwaitGenerations(generations, deadline);
  }
  // Also takes the servers as the scheduler knows them then (RefreshServers).
  absl::StatusOr<elastic::Membership> AwaitRank(int rank, absl::Time deadline) override;
  bool joiner() const override { return joiner_; }
  absl::Status AnnounceLeave(const std::string& reason) override { return scheduler_.AnnounceLeave(reason); }

 private:
  SchedulerCluster(const std::string& scheduler, const JoinOptions& o)
      : peers_(o.rejoin_timeout, o.rejoin_log_every), scheduler_(scheduler, o.cluster_spec) {}
  void OnJobEnded(const std::string& reason);
  void OnPeerDead(const v1::NodeInfo& node);
  void OnPeerRejoined(const v1::NodeInfo& node);
  void OnRollback(const v1::RollbackOrder& order);
  // An elastic job's RegisterResponse.membership, checked (FAILED_PRECONDITION naming
  // what is wrong): the watch, and whether this worker joins a running job.
  absl::Status TakeMembership(const v1::RegisterResponse& reg);
  // servers_ from the scheduler's view now (GetStatus by `deadline`): a joiner connects
  // to the servers only once its join is committed, seconds after it registered, and a
  // server may have died or restarted elsewhere meanwhile. Its old address would keep
  // the joiner trying for the whole --register-timeout while the job waits for its push.
  absl::Status RefreshServers(absl::Time deadline);
  // The servers of the scheduler's `view`; FAILED_PRECONDITION unless it names num_servers.
  static absl::StatusOr<std::vector<ServerEndpoint>> ServersOf(const v1::ClusterView& view, int num_servers);

  int rank_ = -1;
  bool rejoined_ = false;
  PeerTracker peers_;
  int num_workers_ = 0;
  int num_servers_ = 0;
  // From the registration, and for a joiner once more when its join is committed
  // (AwaitRank); only the main thread reads and writes it.
  std::vector<ServerEndpoint> servers_;
  mutable absl::Mutex mu_;
  absl::Status job_status_ ABSL_GUARDED_BY(mu_);
  std::optional<RollbackOrder> rollback_ ABSL_GUARDED_BY(mu_);  // the newest order heard
  uint64_t rollback_done_ ABSL_GUARDED_BY(mu_) = 0;
  bool rollback_enabled_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<MembershipWatch> watch_;  // elastic jobs only
  bool joiner_ = false;
  // Last: destroyed first, joining the heartbeat thread whose hooks use the members above.
  SchedulerClient scheduler_;
};

}  // namespace dtrain::worker
