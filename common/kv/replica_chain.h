// Replication (docs/recovery.md, "Servers: replication and failover"): which servers
// hold a copy of a key range, and in which order.
//
// A key's home server h is its placement (placement.h); with R replicas its chain is
// [h, h+1, ..., h+R-1] mod S. Every node computes the same chains from (h, R, S), so
// nothing is sent: the order only says whose weights a worker takes (the first live
// member), since every member merges the same pushes in rank order and runs the same
// optimizer step, and so holds bit-identical state.
#pragma once

#include <vector>

#include "absl/status/status.h"

namespace dtrain::kv {

// INVALID_ARGUMENT naming --replication unless 1 <= replication <= num_servers (a
// chain may not hold one server twice). num_servers <= 0 (no servers: a local
// kv-store) accepts only 1.
absl::Status CheckReplication(int replication, int num_servers);

// The chain of home server `home`: `replication` distinct ranks starting at `home`.
// Requires CheckReplication(replication, num_servers).ok() and 0 <= home < num_servers.
std::vector<int> ReplicaChain(int home, int replication, int num_servers);

// The first member of `chain` for which `alive(rank)` holds; -1 when none does.
template <typename AlivePredicate>
int FirstAlive(const std::vector<int>& chain, AlivePredicate alive) {
  for (int r : chain) {
    if (alive(r)) return r;
  }
  return -1;
}

}  // namespace dtrain::kv
