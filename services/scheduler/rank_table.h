// One role's ranks (0..size-1): which rank a registration gets, and the incarnation
// each rank hands out. Knows nothing of gRPC: who holds a rank right now is told to it
// as plain RankOccupant values, so it decides and counts while Membership keeps the
// nodes (as common/kv/merge_rule.h: a rule decides, the store keeps the state).
//
// Incarnations: 1 for a rank's first process, one more for each new process that takes
// the rank after the job started. The last one handed out per rank outlives the node's
// entry, and a restarted scheduler learns from the servers which incarnations they
// admitted (NoteAdmittedElsewhere), so a replacement always gets a higher one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/role.h"

namespace dtrain::scheduler {

// How a rank stands, for RankTable's rules and texts.
struct RankOccupant {
  bool present = false;      // a node holds (or held) the rank
  bool live = false;         // neither dead nor a stand-in for a node that left
  bool provisional = false;  // given without a request before the job started: may move
  uint64_t incarnation = 0;
  int pid = 0;
  std::string hostname;
  std::string state;  // "NODE_STATE_ALIVE": how texts name its state
};

class RankTable {
 public:
  // `role`: a server's or a worker's (named in texts); `size`: the job's ranks of that role.
  RankTable(Role role, int size);

  // The rank a registration gets. `requested` < 0: the lowest rank nobody holds, else
  // the lowest one not held by a live node (a restart). A requested rank held
  // provisionally before the job started is taken from its holder, which moves to the
  // lowest free rank (`*moved_to`, -1 when it stays: no rank is free). `held` > 0: the
  // process already holds that incarnation of the rank and takes it from any older one.
  // `occupants[r]` says how rank r stands (size() entries).
  // RESOURCE_EXHAUSTED: every rank is held by a live node. INVALID_ARGUMENT: a rank
  // past the job's. FAILED_PRECONDITION "fenced: ...": a newer incarnation holds it.
  // ALREADY_EXISTS: a live node holds it.
  absl::StatusOr<int> Pick(int requested, uint64_t held, bool started, const std::vector<RankOccupant>& occupants,
                           int* moved_to) const;

  // A process is admitted to `rank`: it keeps `held` (> 0), or gets the rank's first
  // incarnation (1: before the job starts nobody is fenced) or, once `started`, the
  // next one. Returns its incarnation.
  uint64_t Admit(int rank, uint64_t held, bool started);
  // A new process that registered at a restarted scheduler before the survivors were
  // back replaces the one that died with the old scheduler: the next incarnation, above
  // any the servers admitted for the rank.
  uint64_t Replace(int rank);
  // Servers registering again report, per worker rank, the newest incarnation they
  // admitted; Replace hands out a higher one.
  void NoteAdmittedElsewhere(int rank, uint64_t incarnation);

  // "fenced: worker 1 incarnation 1 replaced by 2 (pid 77 on host-b)".
  std::string FencedText(int rank, uint64_t stale, const RankOccupant& holder) const;

  int size() const { return size_; }
  Role role() const { return role_; }

 private:
  // The lowest rank with no occupant, or -1.
  static int LowestFree(const std::vector<RankOccupant>& occupants);

  const Role role_;
  const int size_;
  // The last incarnation handed out per rank (outlives the node's entry).
  std::map<int, uint64_t> last_;
  // Per rank, the newest incarnation the servers admitted (NoteAdmittedElsewhere).
  std::map<int, uint64_t> admitted_elsewhere_;
};

}  // namespace dtrain::scheduler
