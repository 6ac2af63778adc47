// Named, reusable barriers over a group of nodes (workers, servers, or all).
// Knows nothing of gRPC.
//
// Unlike ps-lite's Barrier, every wait has a deadline, and its error names who
// never arrived and how each of them stands, so a stuck job explains itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

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
  // are already open. Once every waiter has returned the barrier is forgotten.
  absl::Status Wait(const std::string& name, v1::BarrierGroup group, const NodeKey& self,
                    absl::Time deadline, const std::function<bool()>& cancelled = nullptr);

  // `key` died: rounds that still wait for it fail now rather than at their deadline.
  void NodeDied(const NodeKey& key, const std::string& why);

  // Wakes every waiter with UNAVAILABLE (the scheduler is stopping).
  void Close();

  // Barriers held in memory (someone is waiting at them, or has not yet returned).
  size_t open_count() const;

 private:
  struct Round {
    uint64_t generation = 0;        // rounds completed or aborted so far
    std::map<NodeKey, int> arrived;  // this round; a count, as a retrying node may wait twice
    std::map<uint64_t, absl::Status> aborted;  // generation -> why it failed
    int inside = 0;  // Wait calls holding a reference to this round; at 0 it is erased
  };
  using Id = std::pair<std::string, int>;  // name, group

  bool IsMember(v1::BarrierGroup group, const NodeKey& key) const;
  int GroupSize(v1::BarrierGroup group) const;
  std::string Label(const Id& id) const;
  std::string MissingText(const Id& id, const Round& round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_workers_;
  const int num_servers_;
  const Describe describe_;
  const BarrierLimits limits_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<Id, Round> rounds_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// "workers", "servers", "all".
std::string GroupName(v1::BarrierGroup group);

}  // namespace dtrain::scheduler
