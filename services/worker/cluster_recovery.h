// The recovery part of a worker's membership (docs/recovery.md): rejoining a dead
// worker's rank, waiting for a dead peer to come back, the identity the servers fence
// on, and the scheduler's rollback orders. Cluster::recovery() returns it; null for a
// cluster without a scheduler (LocalCluster), which behaves as a job that is never
// rejoined, has no dead peers and no fencing identity, and never rolls back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/worker/cluster.h"

namespace dtrain::worker {

// The scheduler's order to go back to the servers' snapshot of `step`:
// every server has reloaded it; this worker pulls exactly version `step` and resumes there.
struct RollbackOrder {
  uint64_t generation = 0;  // one more per rollback
  int64_t step = 0;
  std::string reason;                   // "rolled back from step 812 to step 800: server 1 lost its shard"
  std::vector<ServerEndpoint> servers;  // as registered now: a restarted one may have moved
};

// A worker the scheduler reports dead and not (yet) back.
struct DeadPeer {
  int rank = 0;
  absl::Time since;    // this machine's clock
  std::string reason;  // "heartbeat stream broke", "silent for 3 s", ...
};

class ClusterRecovery {
 public:
  virtual ~ClusterRecovery() = default;

  // This process took its rank after the job started, replacing a dead one: the
  // servers are configured and hold the weights, so it must skip Configure/InitKeys
  // and the "init" barrier and resume instead (DistKVStore::Rejoin).
  virtual bool rejoined() const = 0;
  // While true, this worker's heartbeats say it is catching up (the scheduler and
  // `dtrain status` show REJOINING, then ALIVE once false again). A rejoined worker
  // sets it from right after Join until its first redone step is done. A change
  // reaches the scheduler at once.
  virtual void SetResuming(bool resuming) = 0;
  // The other workers the scheduler reports dead and not back, by rank.
  virtual std::vector<DeadPeer> DeadPeers() const = 0;
  // For a wait on the other workers that ran out of its own time (a sync step): true
  // while a worker is dead and may still rejoin within --rejoin-timeout (keep waiting;
  // logs "waiting for worker 1 to rejoin (dead for 12 s)" every few seconds); false
  // when no worker is dead; ABORTED naming the dead worker when it may not come back.
  // DistKVStore asks it when a server's answer did not come within the sync timeout
  // (AwaitSent) and, on true, asks that server again for the step's pull.
  virtual absl::StatusOr<bool> ExtendWaitForRejoin() = 0;
  // This process's incarnation of its rank and the job id, from the scheduler; sent to
  // the servers so that they fence a replaced incarnation. 0 / "": not known, nothing
  // is sent and the servers do not fence.
  virtual uint64_t incarnation() const = 0;
  virtual std::string job_id() const = 0;

  // A rollback to the servers' snapshots the scheduler ordered and this worker has not
  // carried out (RollbackDone with its generation). A step waiting on the servers
  // notices it within a second (DistKVStore::AwaitSlice).
  virtual std::optional<RollbackOrder> PendingRollback() const = 0;
  virtual void RollbackDone(uint64_t generation) = 0;
  // A step waits for a rollback order (told to the scheduler, which after a restart
  // sends an order it took up from the servers only to the workers that wait).
  virtual void AwaitingRollback(bool awaiting) = 0;
  // The scheduler said every server snapshots: a server lost mid-step is followed by
  // a rollback order, so the step waits for it instead of failing.
  virtual bool RollbackEnabled() const = 0;
};

}  // namespace dtrain::worker
