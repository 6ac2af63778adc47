// Named, reusable barriers over a group of nodes (workers, servers, or all).
// Knows nothing of gRPC.
//
// Unlike ps-lite's Barrier, every wait has a deadline, and its error names who
// never arrived and how each of them stands, so a stuck job explains itself.
//
// Across incarnations (docs/recovery.md, "Barriers across incarnations"): a process
// that took a rank after the job started goes through the same named barriers as the
// one it replaces. Per barrier and member rank the set counts the rounds the rank has
// passed (by any of its processes) and the calls of the rank's newest incarnation that
// returned OK; a call whose index is below the rounds passed returns OK at once (the
// predecessor passed that round), later calls join the current round.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dtrain/v1/scheduler.pb.h"
#include "services/scheduler/membership.h"

namespace dtrain::scheduler {

// Limits that keep a misbehaving client from growing the scheduler's memory.
struct BarrierLimits {
  // Longest barrier name accepted (INVALID_ARGUMENT beyond it).
  size_t max_name_bytes = 256;
  // Barriers (name, group) with someone waiting at once (RESOURCE_EXHAUSTED beyond it).
  // A barrier is forgotten as soon as nobody waits at it any more.
  size_t max_open = 1024;
  // Barriers (name, group) whose history (rounds passed per rank, see BarrierSet) is
  // kept after they close; beyond it the least recently completed one is forgotten,
  // and a replacement calling that name waits for a new round as before recovery.
  // Memory: at most max_history * (members + 1) small entries.
  size_t max_history = 4096;
};

class BarrierSet {
 public:
  // `describe` says how a missing node stands ("last heard 3.2 s ago"); see
  // Membership::Describe.
  using Describe = std::function<std::string(const NodeKey&)>;

  BarrierSet(int num_workers, int num_servers, Describe describe, BarrierLimits limits = {});

  // Blocks until every member of `group` has called Wait with the same name (OK;
  // the barrier is then ready for its next round), `deadline` passes
  // (DEADLINE_EXCEEDED: "barrier 'init' (workers): 1 of 2 arrived after 5.0 s;
  // missing worker rank 1 (last heard 3.2 s ago)"), a member that has not arrived
  // dies (ABORTED, see NodeDied), `cancelled()` turns true (CANCELLED), or Close.
  // INVALID_ARGUMENT when `self` is not a member of `group` or the name is longer
  // than limits.max_name_bytes; RESOURCE_EXHAUSTED when limits.max_open barriers
  // are already open. Once every waiter has returned the round is forgotten (the
  // rounds each rank passed are kept: max_history).
  //
  // `incarnation` is the caller's process of its rank (0: not said, an older client:
  // always joins the current round). Its k-th call (0-based, counting calls that
  // returned OK: a retry after a failure is the same call) returns OK at once when
  // the rank has already passed more than k rounds of this barrier, i.e. a previous
  // incarnation passed them (logged at INFO).
  absl::Status Wait(const std::string& name, v1::BarrierGroup group, const NodeKey& self, uint64_t incarnation,
                    absl::Time deadline, const std::function<bool()>& cancelled = nullptr);
  // The same for a caller that says no incarnation (0).
  absl::Status Wait(const std::string& name, v1::BarrierGroup group, const NodeKey& self, absl::Time deadline,
                    const std::function<bool()>& cancelled = nullptr) {
    return Wait(name, group, self, 0, deadline, cancelled);
  }

  // `key` died: rounds that still wait for it fail now rather than at their deadline.
  void NodeDied(const NodeKey& key, const std::string& why);

  // Wakes every waiter with UNAVAILABLE (the scheduler is stopping).
  void Close();

  // Barriers held in memory (someone is waiting at them, or has not yet returned).
  size_t open_count() const;
  // Barriers whose history is kept (at most limits.max_history).
  size_t history_count() const;
  // Rounds of barrier (name, group) that `member` has passed, by any incarnation.
  uint64_t rounds_passed(const std::string& name, v1::BarrierGroup group, const NodeKey& member) const;

 private:
  struct Round {
    uint64_t generation = 0;  // rounds completed or aborted so far
    // This round: member -> incarnation -> calls waiting. A count, as a retrying node
    // may wait twice (its first call not yet noticed as cancelled); a replacement may
    // wait next to its paused predecessor. The rank counts once either way.
    std::map<NodeKey, std::map<uint64_t, int>> arrived;
    std::map<uint64_t, absl::Status> aborted;  // generation -> why it failed
    int inside = 0;                            // Wait calls holding a reference to this round; at 0 it is erased
  };
  // What a member rank did at one barrier; kept after the barrier closes.
  struct Passed {
    uint64_t rounds = 0;       // completed rounds it was in, by any incarnation
    uint64_t incarnation = 0;  // its newest incarnation seen here (> 0)
    uint64_t calls = 0;        // that incarnation's calls that returned OK
    // Who passed which rounds: (first round, incarnation), one entry per change of
    // incarnation, the last kPassersKept only (for the log line).
    std::vector<std::pair<uint64_t, uint64_t>> passers;
  };
  struct History {
    std::map<NodeKey, Passed> members;
    uint64_t last_used = 0;  // BarrierSet::uses_ when a round last completed or a call was let through
  };
  using Id = std::pair<std::string, int>;  // name, group

  bool IsMember(v1::BarrierGroup group, const NodeKey& key) const;
  int GroupSize(v1::BarrierGroup group) const;
  std::string Label(const Id& id) const;
  std::string MissingText(const Id& id, const Round& round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True (logged) when `incarnation`'s next call at `id` is for a round the rank
  // already passed; counts that call.
  bool PassedBefore(const Id& id, const NodeKey& self, uint64_t incarnation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The history of `id`, made (evicting the least recently used one beyond the cap) if new.
  History& HistoryOf(const Id& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A round of `id` completed with `arrived`: each rank passed one more round.
  void RecordPassed(const Id& id, const std::map<NodeKey, std::map<uint64_t, int>>& arrived)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_workers_;
  const int num_servers_;
  const Describe describe_;
  const BarrierLimits limits_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<Id, Round> rounds_ ABSL_GUARDED_BY(mu_);
  std::map<Id, History> history_ ABSL_GUARDED_BY(mu_);
  uint64_t uses_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// "workers", "servers", "all".
std::string GroupName(v1::BarrierGroup group);

}  // namespace dtrain::scheduler
