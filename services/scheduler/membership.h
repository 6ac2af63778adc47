// Who is in the job: rank assignment, node states, liveness, and the texts that
// say who is missing. Knows nothing of gRPC.
//
// Blocking waits take absolute deadlines on the real clock. Timestamps and the
// liveness sweep read the injected clock, so tests can move time by hand.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::scheduler {

using Clock = std::function<absl::Time()>;

struct NodeKey {
  v1::Role role = v1::ROLE_UNSPECIFIED;
  int rank = -1;
  bool operator<(const NodeKey& o) const { return role != o.role ? role < o.role : rank < o.rank; }
  bool operator==(const NodeKey& o) const { return role == o.role && rank == o.rank; }
};

// "worker", "server", "scheduler".
std::string RoleName(v1::Role role);
// "worker 1".
std::string NodeName(const NodeKey& key);

struct MembershipOptions {
  int num_workers = 1;
  int num_servers = 1;
  std::string kv_store = "dist_sync";
  // A node that sent nothing for this long is DEAD.
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  Clock clock;  // null: absl::Now
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
  // ALREADY_EXISTS: the requested rank is held by a live node (or requested twice).
  // RESOURCE_EXHAUSTED: every rank of the role is held. INVALID_ARGUMENT: a bad role
  // or rank, or job sizes that differ from the scheduler's. `*ticket` (if given)
  // identifies this registration for AwaitAllRegistered.
  absl::StatusOr<int> Register(const v1::RegisterRequest& request, uint64_t* ticket = nullptr);

  // Blocks until every expected node has registered once and returns the node's
  // final rank, or `deadline` passes (DEADLINE_EXCEEDED with RegistrationText),
  // `cancelled()` turns true (CANCELLED), or Close. On failure the registration is
  // withdrawn so its rank is free again.
  absl::StatusOr<int> AwaitAllRegistered(uint64_t ticket, absl::Time deadline,
                                         const std::function<bool()>& cancelled);
  // The same for the node registered now as `self` (whose rank cannot move: tests).
  absl::Status AwaitAllRegistered(const NodeKey& self, absl::Time deadline,
                                  const std::function<bool()>& cancelled);

  // A heartbeat from the stream identified by `*incarnation` (0 on a stream's first
  // heartbeat; filled in then). Marks the node ALIVE and records step and speed.
  // NOT_FOUND: unknown node. FAILED_PRECONDITION: the node is DEAD, or its rank was
  // taken over by a newer registration. A FINISHED node's heartbeats are ignored.
  absl::Status Heartbeat(const NodeKey& key, uint64_t* incarnation, int64_t step, double samples_per_sec);

  // The node's heartbeat stream ended. Marks it DEAD (with `why`) unless it has left
  // or was replaced; returns true when it became DEAD now.
  bool StreamClosed(const NodeKey& key, uint64_t incarnation, const std::string& why);

  // The node is done. NOT_FOUND for an unknown node. `failed` ends the job.
  absl::Status Leave(const NodeKey& key, bool failed, const std::string& reason);

  // Marks DEAD every node silent for longer than the heartbeat timeout (nodes still
  // waiting for registration to complete are exempt) and returns them.
  std::vector<v1::NodeInfo> SweepSilent();

  // Deaths in order; `*cursor` (start at 0) moves past those returned. Nodes that
  // registered again since are skipped.
  std::vector<v1::NodeInfo> DeathsSince(size_t* cursor) const;

  v1::ClusterView View() const;           // registered servers, sorted by rank
  std::vector<v1::NodeInfo> Nodes() const;  // servers then workers, by rank
  std::optional<v1::NodeInfo> Find(const NodeKey& key) const;
  bool AllRegistered() const;               // latched once every rank registered

  // The job is over: every worker left, or a node left with failed=true. `reason`
  // says which ("all 2 workers finished", "worker 1 failed: ...").
  bool JobOver(std::string* reason) const;
  // Non-empty once a node left with failed=true ("worker 1 failed: out of memory"),
  // or every worker is gone and one died ("worker 1 died (...) and no worker is left").
  std::string Failure() const;
  // Every registered node has left or died.
  bool AllGone() const;

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
    v1::NodeInfo info;
    absl::Time last_heard;
    absl::Time dead_at;
    std::string death_reason;
    uint64_t incarnation = 0;
    bool provisional = false;  // rank picked by us before registration completed; may move
  };
  int Expected(v1::Role role) const;
  int CountRegistered(v1::Role role) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node registered with `incarnation`, or end().
  std::map<NodeKey, Node>::iterator FindTicket(uint64_t incarnation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDead(Node& node, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string RegistrationTextLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string FailureLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Now() const { return options_.clock(); }

  const MembershipOptions options_;
  const absl::Time start_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<NodeKey, Node> nodes_ ABSL_GUARDED_BY(mu_);
  bool all_registered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time all_registered_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t next_incarnation_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<NodeKey> deaths_ ABSL_GUARDED_BY(mu_);
  std::string failure_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtrain::scheduler
