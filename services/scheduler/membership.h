// Who is in the job: a facade over its parts, each knowing nothing of gRPC and
// testable alone: RankTable (which rank a registration gets, incarnations), Liveness
// (last heard, deaths, the rejoin window, on the injected clock), JobIdentity (which
// job this is), and the outcome and its texts (membership_outcome.cc). Membership
// keeps the nodes and one lock over them all. It takes and gives plain values
// (membership_types.h); the service converts them to and from the wire
// (membership_proto.h).
//
// Recovery (docs/recovery.md): each (role, rank) has an incarnation, 1 for its first
// process and one more each time a new process takes the rank. The job has an id.
// A process of another job or of an older incarnation is refused (FAILED_PRECONDITION,
// "fenced: ..."). With a rejoin timeout, a dead worker is not final: a new process may
// take its rank, or the old one may speak again, until the timeout fails the job.
//
// Blocking waits take absolute deadlines on the real clock. Timestamps and the
// liveness sweep read the injected clock, so tests can move time by hand.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/defaults.h"
#include "common/kvstore_mode.h"
#include "services/scheduler/elastic_ranks.h"
#include "services/scheduler/job_identity.h"
#include "services/scheduler/liveness.h"
#include "services/scheduler/membership_types.h"
#include "services/scheduler/rank_table.h"

namespace dtrain::scheduler {

struct MembershipOptions {
  int num_workers = 1;
  int num_servers = 1;
  // Replicas per key range (--replication); a node registering another is refused.
  int replication = 1;
  KVStoreMode kv_store = kDefaultJobMode;
  // A node that sent nothing for this long is DEAD.
  absl::Duration heartbeat_timeout = absl::Seconds(kDefaultHeartbeatTimeoutSeconds);
  // The job's id (--job-id). Empty: learned from the nodes, a survivor's id over a new
  // process's (JobIdentity), else made up once every node registered.
  std::string job_id;
  // How long a dead worker may take to come back before the job fails (--rejoin-timeout).
  // Zero: today's rules, a death is final for the process that died (a new process
  // may still take the rank) and barriers waiting for it fail at once.
  absl::Duration rejoin_timeout = absl::ZeroDuration();
  Clock clock;  // null: absl::Now
  // An elastic job's ranks (--elastic; null: not elastic, the workers are fixed at
  // num_workers). The job still starts with ranks 0 .. num_workers - 1; the worker rank
  // table spans MAX, later workers join (Register), deaths are dropped rather than
  // failing the job (DroppableWorkers), and the job is over when the latest
  // generation's workers finished. Must outlive the Membership.
  ElasticRanks* elastic = nullptr;
};

class Membership {
 public:
  explicit Membership(MembershipOptions options);

  // Takes a rank for the node. A requested rank (DMLC_WORKER_ID, --rank) is given
  // if free or held by a DEAD node. Until every node has registered, a node without
  // a request only holds its rank provisionally (the lowest free one): a later
  // request for that rank moves it to another free rank, so requested ranks win
  // whatever the start order; AwaitAllRegistered returns the final rank. After
  // that, a node without a request gets the lowest free rank, else the lowest dead one.
  // ALREADY_EXISTS: the requested rank is held by a live node before the job runs (a
  // duplicate); UNAVAILABLE once it runs (the holder may be dead and not yet found so:
  // the caller retries). RESOURCE_EXHAUSTED: every rank of the role is held. INVALID_ARGUMENT: a bad role
  // or rank, or job sizes that differ from the scheduler's. `*ticket` (if given)
  // identifies this registration for AwaitAllRegistered.
  //
  // A new process (request.incarnation == 0) gets the rank's next incarnation;
  // once the job has started it is REJOINING and counts as a restart of the rank.
  // A process that already holds an incarnation (its scheduler was restarted, or
  // it lost its stream) names it and its rank: it keeps the incarnation and takes
  // the rank from any older one (fencing it); FAILED_PRECONDITION "fenced: ..." when
  // the rank's holder is newer. FAILED_PRECONDITION naming both ids when the request
  // belongs to another job.
  absl::StatusOr<int> Register(const Registration& request, uint64_t* ticket = nullptr);

  // Blocks until every expected node has registered once and returns the node's
  // final rank, or `deadline` passes (DEADLINE_EXCEEDED with RegistrationText),
  // `cancelled()` turns true (CANCELLED), or Close. On failure the registration is
  // withdrawn so its rank is free again.
  absl::StatusOr<int> AwaitAllRegistered(uint64_t ticket, absl::Time deadline, const std::function<bool()>& cancelled);
  // What a registration got, once AwaitAllRegistered returned its rank: the node as
  // it stands (incarnation, restarts) and whether the job had already started
  // (the node rejoins). NOT_FOUND when the ticket's registration is gone.
  struct Admission {
    NodeRecord node;
    bool rejoined = false;
    uint64_t replaced_incarnation = 0;  // the incarnation fenced by this one (0: none)
  };
  absl::StatusOr<Admission> Admitted(uint64_t ticket) const;
  // The same for the node registered now as `self` (whose rank cannot move: tests).
  absl::Status AwaitAllRegistered(const NodeKey& self, absl::Time deadline, const std::function<bool()>& cancelled);

  // A heartbeat from the stream identified by `*incarnation` (0 when the node did not
  // say: the current one, filled in). Marks the node ALIVE (REJOINING while
  // `resuming`) and records step and speed. NOT_FOUND: unknown node or incarnation
  // (register again). FAILED_PRECONDITION: "fenced: ..." when a newer incarnation
  // took the rank; "declared dead" when the node is DEAD and the rejoin timeout is
  // zero. With a rejoin timeout, a DEAD node that speaks again is revived (`*revived`)
  // unless the job already failed. A FINISHED node's heartbeats are ignored.
  absl::Status Heartbeat(const NodeKey& key, uint64_t* incarnation, int64_t step, double samples_per_sec,
                         bool resuming = false, bool* revived = nullptr);
  // A worker's epoch figures, kept in its NodeRecord.recent_epochs: one per
  // epoch (a repeat replaces), the newest kRecentEpochs, kept across the rank's
  // incarnations. Ignored for servers and unknown nodes.
  static constexpr int kRecentEpochs = 8;
  void RecordEpoch(const NodeKey& key, const EpochFigures& report);

  // OK when a request from `key` with `job_id` and `incarnation` (empty / 0: not
  // said, accepted) comes from the job and the rank's current process; else
  // FAILED_PRECONDITION naming the other job or "fenced: ...", NOT_FOUND when the
  // node is not registered.
  absl::Status CheckCaller(const NodeKey& key, const std::string& job_id, uint64_t incarnation) const;

  // The job id: the options', the nodes' (JobIdentity), or made up once every node
  // registered; "" before that when no node brought one.
  std::string JobId() const;

  // The node's heartbeat stream ended. Marks it DEAD (with `why`) unless it has left
  // or was replaced; returns true when it became DEAD now.
  bool StreamClosed(const NodeKey& key, uint64_t incarnation, const std::string& why);

  // The node is done. NOT_FOUND for an unknown node. `failed` ends the job.
  absl::Status Leave(const NodeKey& key, bool failed, const std::string& reason);

  // Marks DEAD every node silent for longer than the heartbeat timeout (nodes still
  // waiting for registration to complete are exempt) and returns them.
  std::vector<NodeRecord> SweepSilent();

  // Deaths in order; `*cursor` (start at 0) moves past those returned. Nodes that
  // registered again since are skipped.
  std::vector<NodeRecord> DeathsSince(size_t* cursor) const;
  // Comebacks in order (a new incarnation took a dead or stale rank, or a dead node
  // spoke again); `*cursor` as above. Skips those that died again or were replaced.
  std::vector<NodeRecord> RejoinsSince(size_t* cursor) const;

  // True when `key` is DEAD and may still come back (a worker, within the rejoin
  // timeout): barriers and waits should not fail on its death yet.
  bool MayRejoin(const NodeKey& key) const;
  // Fails the job (see Failure) for each worker dead longer than the rejoin timeout
  // and returns them (once each), so that barriers waiting for them fail. Not for an
  // elastic job, whose dead workers are dropped instead (DroppableWorkers).
  std::vector<NodeRecord> ExpireRejoinWaits();
  // An elastic job: the workers of its latest generation dead longer than the rejoin
  // timeout (at once without one), each incarnation once, for ElasticJob::Drop.
  std::vector<NodeRecord> DroppableWorkers();

  // A restarted scheduler (recognised by a registration that carried an incarnation
  // before the job started here) still missing workers one heartbeat timeout after
  // that first registration, with every server back: the missing workers left the job
  // before the restart (a node that left does not register again; a live one does so
  // within a second or two). They are marked FINISHED, the job starts, and the
  // waiting registrations are answered. A process may still take such a rank (a new
  // incarnation) or register again with its own. Returns those ranks, once. Missing
  // servers are waited for (they never leave before the job ends).
  std::vector<NodeKey> SettleRestart();

  ClusterShape View() const;              // registered servers, sorted by rank
  std::vector<NodeRecord> Nodes() const;  // servers then workers, by rank
  std::optional<NodeRecord> Find(const NodeKey& key) const;
  bool AllRegistered() const;  // latched once every rank registered

  // The job is over: every worker left, or a node left with failed=true. `reason`
  // says which ("all 2 workers finished", "worker 1 failed: ...").
  bool JobOver(std::string* reason) const;
  // Non-empty once a node left with failed=true ("worker 1 failed: out of memory"),
  // or every worker is gone and one died ("worker 1 died (...) and no worker is left").
  std::string Failure() const;
  // Every registered node has left or died.
  bool AllGone() const;
  // Fails the job with `why` (the first reason stays), e.g. a rollback that cannot be done.
  void FailJob(const std::string& why);

  // "registration: 1 of 2 workers, 2 of 2 servers after 30 s; missing worker rank 1".
  std::string RegistrationText() const;
  // How a node stands, for texts naming it: "last heard 3.2 s ago",
  // "DEAD since 4.0 s (heartbeat stream broke)", "not registered".
  std::string Describe(const NodeKey& key) const;

  // Wakes every AwaitAllRegistered with `why` (default UNAVAILABLE: the scheduler is
  // stopping; the registration deadline passes its own text on to the waiting nodes).
  void Close(absl::Status why = absl::UnavailableError("the scheduler is shutting down"));

 private:
  struct Node {
    NodeRecord info;  // info.incarnation: the process holding the rank now
    LivenessRecord live;
    uint64_t ticket = 0;            // this registration, unique across nodes (AwaitAllRegistered)
    bool provisional = false;       // rank picked by us before registration completed; may move
    bool rejoined = false;          // registered after the job started (or kept its incarnation)
    uint64_t replaced = 0;          // the incarnation this registration fenced
    bool assumed_finished = false;  // SettleRestart's stand-in for a node that did not come back
    std::string job_id;             // the id its registration brought ("" when none)
  };
  struct Comeback {
    NodeKey key;
    uint64_t incarnation = 0;
  };
  int Expected(Role role) const;
  // The role's rank table (workers or servers; CheckRegisterRequest refused the rest).
  RankTable& RanksLocked(Role role) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return role == Role::kWorker ? workers_ : servers_;
  }
  // How each of the role's ranks stands, for RankTable::Pick.
  std::vector<RankOccupant> OccupantsLocked(Role role) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static RankOccupant OccupantOf(const Node& node);
  // Register's steps. The request's own consistency and its agreement with the job's
  // shape (no lock needed): INVALID_ARGUMENT saying what differs.
  absl::Status CheckRegisterRequest(const Registration& request) const;
  // The rank the request gets (Register's rules; moves a provisional holder away).
  // `*joiner`: the worker joins an elastic job (ElasticPickLocked).
  absl::StatusOr<int> PickRankLocked(const Registration& request, bool* joiner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An elastic job's worker registration (membership_elastic.cc): the rank of a joiner
  // (a worker after the start asking for no rank, or for a free one outside the job),
  // nullopt for today's rules (before the start, a restart of a rank in the job).
  absl::StatusOr<std::optional<int>> ElasticPickLocked(const Registration& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the node at `key` with its incarnation; returns its ticket. A `joiner` is
  // new to the job: neither a restart nor rejoining.
  uint64_t AdmitLocked(const NodeKey& key, const Registration& request, bool joiner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job started here, or this scheduler restarted into a running one.
  bool JobRunsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A node of `key` that is neither DEAD nor SettleRestart's stand-in.
  bool HeldByLiveLocked(const NodeKey& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int CountRegistered(Role role) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node registered with `incarnation`, or end().
  std::map<NodeKey, Node>::iterator FindTicket(uint64_t ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<NodeKey, Node>::const_iterator FindTicket(uint64_t ticket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job id a registration brings (JobIdentity::Claim; `survivor`: it holds an
  // incarnation). When it displaces a weaker id, the registrations that brought that id
  // are withdrawn: their AwaitAllRegistered fails with FAILED_PRECONDITION saying why.
  absl::Status AdoptJobLocked(const std::string& job_id, bool survivor, const std::string& who)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every expected node registered: the job starts and its id is fixed. At a restarted
  // scheduler, the new processes among them become rejoining replacements.
  void MarkAllRegisteredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "fenced: worker 1 incarnation 1 replaced by 2 (pid 77 on host-b)".
  std::string FencedText(const NodeKey& key, uint64_t stale, const Node& holder) const;
  bool MayRejoinLocked(const NodeKey& key, const Node& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDead(Node& node, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string RegistrationTextLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string FailureLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Now() const { return liveness_.Now(); }

  const MembershipOptions options_;
  const Liveness liveness_;
  const absl::Time start_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<NodeKey, Node> nodes_ ABSL_GUARDED_BY(mu_);
  bool all_registered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time all_registered_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  RankTable workers_ ABSL_GUARDED_BY(mu_);
  RankTable servers_ ABSL_GUARDED_BY(mu_);
  // When the first registration that carried an incarnation arrived before the job
  // started here (this scheduler restarted; see SettleRestart); InfiniteFuture: none.
  absl::Time restart_seen_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  JobIdentity job_ ABSL_GUARDED_BY(mu_);
  // Registrations withdrawn because their job id lost to a survivor's, by ticket.
  std::map<uint64_t, absl::Status> withdrawn_ ABSL_GUARDED_BY(mu_);
  std::vector<NodeKey> deaths_ ABSL_GUARDED_BY(mu_);
  std::vector<Comeback> comebacks_ ABSL_GUARDED_BY(mu_);
  std::string failure_ ABSL_GUARDED_BY(mu_);
  // DroppableWorkers' answers so far: (rank, incarnation).
  std::set<std::pair<int, uint64_t>> dropped_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtrain::scheduler
