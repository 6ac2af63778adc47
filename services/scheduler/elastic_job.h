// The scheduler's side of an elastic job (--elastic MIN:MAX, docs/elastic.md): the
// ElasticCoordinator under a lock, driven from the heartbeat streams and the ticker.
//   - Joins come from Membership (ElasticRanks), leave notices from LeaveRequest,
//     dead workers past --rejoin-timeout from the ticker (Drop).
//   - A pending change runs whenever a server's heartbeat or a tick comes (Advance):
//     its orders go out on the servers' heartbeat responses (HeartbeatGates).
//   - Once every server committed, the new schedule goes to the workers on every
//     heartbeat response, the change is logged, PREFIX-membership.json is written,
//     and the dtrain_workers gauge moves.
// gRPC-free (it fills the heartbeat messages only) and thread-safe.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/elastic/elastic_spec.h"
#include "common/elastic/membership_proto.h"
#include "dtrain/v1/scheduler.pb.h"
#include "services/scheduler/elastic_coordinator.h"
#include "services/scheduler/elastic_drop.h"
#include "services/scheduler/elastic_ranks.h"
#include "services/scheduler/heartbeat_gates.h"
#include "services/scheduler/rollback_coordinator.h"

namespace dtrain::scheduler {

class SchedulerMetrics;

struct ElasticJobOptions {
  elastic::ElasticSpec spec;  // enabled(), checked (CheckElasticSpec)
  int num_workers = 1;        // -n: the workers the job starts with, ranks 0 .. n-1
  int num_servers = 1;
  // How long a dead worker may take to come back before it is dropped, and how long the
  // job waits below MIN before it fails (--rejoin-timeout).
  absl::Duration rejoin_timeout = absl::ZeroDuration();
  // Where the schedule is written on every change (empty: nowhere).
  std::string membership_file;
  // The servers' snapshots (null: none, --replication > 1): the newest step all hold,
  // and the rollback a dead worker's removal may need. Must outlive the job.
  RollbackCoordinator* rollback = nullptr;
  SchedulerMetrics* metrics = nullptr;  // the workers gauge (null: none)
  std::function<absl::Time()> clock;    // null: absl::Now
};

class ElasticJob final : public ElasticRanks {
 public:
  // Reads --replay-membership if given: errors name the file (and the line of a file that
  // does not parse) or the generation where the recording differs from the job's start.
  static absl::StatusOr<std::unique_ptr<ElasticJob>> Create(ElasticJobOptions options);

  // "2:4": the text every node's RegisterRequest.elastic must parse to.
  std::string SpecText() const;

  // ElasticRanks (for Membership).
  int max_workers() const override { return options_.spec.max_workers; }
  bool InJob(int rank) const override;
  absl::StatusOr<int> Join(int requested, const std::set<int>& busy = {}) override;
  std::vector<int> Workers() const override;

  // A leave notice (LeaveRequest.elastic_leave): the rank goes with the next change.
  // FAILED_PRECONDITION naming MIN when too few workers would remain; NOT_FOUND for a
  // rank not in the latest generation.
  absl::Status Leave(int rank);
  // Worker `rank` died (`why`) and was not replaced within --rejoin-timeout: it is
  // removed from the step PlanDrop picks. Ignored for a rank not in the job.
  void Drop(int rank, const std::string& why);
  // Worker `rank` failed (`why`: its failed Leave) before its first step: a joiner of the
  // latest generation, or one whose join is not committed yet (which is withdrawn). It is
  // removed at once as a dead worker is; if the servers then show that its generation
  // merged a step, the job fails naming it. False (the failure is the job's, as for any
  // worker) for a rank that is no such joiner, or when too few workers would remain.
  bool RemoveFailedJoiner(int rank, const std::string& why);

  // Runs the change that is due, if any. Returns why the job fails ("" while it goes on):
  // a dead worker whose step cannot be taken back, or too few workers for too long.
  std::string Advance();

  // A heartbeat of server `rank`'s process `incarnation` (its report; null when it sent
  // none, and the last one of that process stands):
  // runs the change that is due and puts the server's order on `response`. Returns why
  // the job fails, or "".
  std::string OnServerHeartbeat(int rank, uint64_t incarnation, const v1::MembershipReport* report,
                                v1::HeartbeatResponse* response);

  // The membership as committed on every server (RegisterResponse, worker heartbeats,
  // GetStatus).
  v1::MembershipState State() const;

 private:
  ElasticJob(ElasticJobOptions options, ElasticCoordinator coordinator);
  absl::Time Now() const { return options_.clock ? options_.clock() : absl::Now(); }
  // A change committed on every server: the log line, the file, the gauge.
  void CommittedLocked(const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The dead workers' removal: waits while too few would remain, proposes, plans, commits.
  std::string AdvanceDropLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The removal's plan carried out: a commit that drops the pending pushes, or a
  // rollback to the snapshot and, once every server reloaded, a commit from its step.
  std::string CarryOutLocked(const DropPlan& plan, int first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the job fails when `plan` would remove a failed joiner that stepped after all
  // (its generation merged a step): "" when none does.
  std::string FailedJoinerThatSteppedLocked(const DropPlan& plan) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the removal of a dead joiner of the latest generation waits ("" when it does not):
  // a step before its join may still be merging (its pushes admitted before the commit),
  // so the keys are not all at its join step yet.
  std::string JoinerWaitLocked(const std::vector<ServerVersions>& versions) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs `s` once per distinct text (a change waiting logs each reason once).
  void NoteLocked(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Aborts the proposal of the next generation on the servers that hold one while no
  // change is pending here and no server committed it (a scheduler that restarted between
  // proposing and committing).
  void AbortStrayProposalsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes up the generations server `rank` holds beyond the schedule (a restarted
  // scheduler). Returns why the job fails ("" while it goes on).
  std::string TakeUpFrom(int rank, const v1::MembershipReport& report);

  const ElasticJobOptions options_;
  HeartbeatGates gates_;
  mutable absl::Mutex mu_;
  ElasticCoordinator coordinator_ ABSL_GUARDED_BY(mu_);
  struct DeadWorker {
    std::string why;
    // A joiner that failed before its first step: the step its generation starts at,
    // the only one its removal may start at (nullopt: a worker that died).
    std::optional<int64_t> failed_joining_at;
  };
  std::map<int, DeadWorker> dead_ ABSL_GUARDED_BY(mu_);  // dropped, not committed yet
  std::set<int> reported_ ABSL_GUARDED_BY(mu_);          // servers that sent a MembershipReport to this process
  // Since when the dead workers' removal waits below MIN (InfiniteFuture: it does not).
  absl::Time below_min_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::string last_note_ ABSL_GUARDED_BY(mu_);
  // A removal's rollback under way: its order's generation (0: none) and step.
  uint64_t rollback_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rollback_step_ ABSL_GUARDED_BY(mu_) = 0;
};

// Whether a node's RegisterRequest.elastic (`theirs`, "" when it said none) is the
// job's (`job`: null for a job that is not elastic): INVALID_ARGUMENT naming both
// otherwise, as a num_servers mismatch is refused. "2:4" and "02:4" are the same.
absl::Status CheckNodeElastic(const std::string& theirs, const ElasticJob* job, const std::string& who);

}  // namespace dtrain::scheduler
