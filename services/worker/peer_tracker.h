// What a worker knows of the other workers' deaths and comebacks (from the
// scheduler's heartbeat answers), and whether a wait that ran out of time may go on
// because a dead worker may still rejoin (--rejoin-timeout; docs/recovery.md).
// No gRPC and no clock of its own: times are passed in, so the rules are unit-tested.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/worker/cluster_recovery.h"

namespace dtrain::worker {

class PeerTracker {
 public:
  // `rejoin_timeout`: how long a dead worker may take to come back (0: a death is
  // final for this worker: waits fail at once naming it). `log_every`: how often an
  // extended wait says what it waits for.
  explicit PeerTracker(absl::Duration rejoin_timeout, absl::Duration log_every = absl::Seconds(10))
      : rejoin_timeout_(rejoin_timeout), log_every_(log_every) {}

  absl::Duration rejoin_timeout() const { return rejoin_timeout_; }

  // Worker `rank` died at `since` (this machine's clock), for `reason`. A second
  // report of the same death keeps the first time.
  void OnDead(int rank, absl::Time since, const std::string& reason);
  // Worker `rank` is back (a new incarnation took the rank, or it resumed).
  void OnRejoined(int rank);

  // The workers dead and not back, by rank.
  std::vector<DeadPeer> DeadPeers() const;

  // For a wait that ran out of its own time at `now`:
  //   false: no worker is dead (the wait's own error applies);
  //   true:  a worker is dead and may still rejoin: keep waiting (every `log_every`
  //          logs "waiting for worker 1 to rejoin (dead for 12 s)");
  //   ABORTED naming the dead worker, its reason and the timeout once it has been
  //   dead longer than the rejoin timeout (at once when that is 0).
  absl::StatusOr<bool> ExtendWait(absl::Time now);

  // The text of the death that fails this worker: "worker 1 died (heartbeat stream
  // broke) and did not rejoin within 30 s (--rejoin-timeout)".
  static std::string DeathText(const DeadPeer& peer, absl::Duration rejoin_timeout);

 private:
  const absl::Duration rejoin_timeout_;
  const absl::Duration log_every_;
  mutable absl::Mutex mu_;
  std::map<int, DeadPeer> dead_ ABSL_GUARDED_BY(mu_);
  absl::Time last_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace dtrain::worker
