// A parameter server's side of a membership change (docs/elastic.md): the scheduler's
// orders (HeartbeatResponse.membership_order: propose, commit, abort) carried out on
// the server's gate and store, and the report that answers them
// (HeartbeatRequest.membership). No gRPC: the heartbeat hands each order here and
// sends Report() with every request.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/elastic/membership_gate.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::server {

// Thread-safe.
class MembershipOrders {
 public:
  // `gate` and `store` (whose steps the gate decides) must outlive this. `answered`
  // (may be empty) runs after each order carried out, so that the heartbeat can send
  // its answer at once rather than at the next interval.
  MembershipOrders(elastic::MembershipGate* gate, kv::ShardStore* store, std::function<void()> answered = {})
      : gate_(gate), store_(store), answered_(std::move(answered)) {}

  // Carries out `order` once per (generation, phase): the scheduler repeats it on every
  // answer until a report answers it. PROPOSE -> Propose; COMMIT -> Commit, or with
  // drop_pending CommitDroppingStep over the store's DropPendingStep (the pulls parked
  // for that step answered ABORTED "membership changed from step S: ..."); ABORT ->
  // Abort. A failure is not retried: the report carries it (`error`) to the scheduler,
  // which decides.
  void OnOrder(const v1::MembershipOrder& order);

  // What every heartbeat says: the answer to the last order carried out (generation,
  // phase, highest_step, committed_from, error; phase PHASE_UNSPECIFIED before any), the
  // generations the gate holds, and the least and greatest version of the store's keys
  // (-1 and -1 with no keys), from which the scheduler plans a dead worker's removal.
  v1::MembershipReport Report() const;

 private:
  // The answer to `order`, carried out now.
  v1::MembershipReport CarryOut(const v1::MembershipOrder& order);
  absl::Status Commit(const v1::MembershipOrder& order, v1::MembershipReport* answer);

  elastic::MembershipGate* const gate_;
  kv::ShardStore* const store_;
  const std::function<void()> answered_;
  // One order at a time (the heartbeat's reader is one thread; this keeps it so).
  absl::Mutex order_mu_;
  mutable absl::Mutex mu_;
  bool acted_ ABSL_GUARDED_BY(mu_) = false;  // an order was carried out; last_ is its answer
  v1::MembershipReport last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtrain::server
