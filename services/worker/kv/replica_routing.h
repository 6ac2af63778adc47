// Replication, the worker's side (docs/recovery.md, "Servers: replication and
// failover"): which members of each key's chain take part in its steps, and which one
// gives the weights. gRPC-free: DistKVStore feeds it what the streams and the answers
// say (a broken stream, a join notice) and asks it where to send.
//
// A server is dead once its stream broke: out of every chain. A key's chain takes a
// member back when a partner copied the key to it (a join notice); the server is then
// alive again (DistKVStore reconnects to its new address first).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dtrain::worker {

class ReplicaRouting {
 public:
  // `homes[i]`: slice i's home server (its placement). Requires
  // kv::CheckReplication(replication, num_servers).ok().
  ReplicaRouting(const std::vector<int>& homes, int replication, int num_servers);

  size_t num_slices() const { return chains_.size(); }
  int replication() const { return replication_; }
  // Slice i's chain, home first (common/kv/replica_chain.h).
  const std::vector<int>& chain(size_t i) const { return chains_[i]; }
  bool Alive(int server) const { return dead_why_[server].empty(); }
  // Why `server` is dead ("" when alive).
  const std::string& why_dead(int server) const { return dead_why_[server]; }
  // Member `server` of slice i's chain takes part in its steps.
  bool InChain(size_t i, int server) const;
  // The first member of slice i's chain that takes part (it gives the weights); -1
  // when none is left.
  int Head(size_t i) const;
  // `server` leaves every chain. Returns false when it was dead already.
  bool MarkDead(int server, const std::string& why);
  // Slice i goes on without `server` (it lacks the key: restarted empty).
  void LeaveChain(size_t i, int server);
  // `server` holds slice i's key again (a partner copied it): alive, and back in the
  // chain. Returns false when it is not a member of the chain or was in it already.
  bool Join(size_t i, int server);
  int live_servers() const;
  // FAILED_PRECONDITION naming `key` and why each member of slice i's chain is gone.
  absl::Status NoReplicaLeft(size_t i, uint64_t key) const;

 private:
  int replication_;
  std::vector<std::vector<int>> chains_;
  std::vector<std::vector<bool>> in_chain_;  // per slice, per chain position
  std::vector<std::string> dead_why_;        // per server
};

}  // namespace dtrain::worker
