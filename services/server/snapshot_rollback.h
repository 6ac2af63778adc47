// A server's side of a rollback to snapshots (docs/recovery.md "Servers:
// snapshots and rollback"): tells the scheduler which complete snapshots it holds and
// carries out the scheduler's RollbackOrder: a server that kept running restores its
// store from its snapshot of the order's step; a restarted one (not configured: its
// shard died with its predecessor) configures itself from the snapshot and loads it.
// Then it acknowledges the order's generation, and the scheduler lets the workers go.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/scheduler.pb.h"
#include "services/server/snapshot_writer.h"

namespace dtrain::server {

class SnapshotRollback {
 public:
  // Sends a report to the scheduler (SchedulerClient::SetSnapshotReport); called
  // whenever what we hold or what we did changes.
  using Reporter = std::function<void(const v1::SnapshotReport& report)>;

  // `store` and `writer` must outlive this object.
  SnapshotRollback(std::string dir, kv::ShardStore* store, SnapshotWriter* writer, Reporter reporter);

  // Once the rank is known and the writer has listed what is on disk: the first report.
  // `replaced`: this process took the rank of a server of a running job; while its
  // store holds nothing it reports its shard lost (SnapshotReport.shard_lost), which is
  // how a scheduler that restarted since (and never saw the old process) knows to
  // order a rollback.
  void Start(int rank, bool replaced = false);
  // The snapshots kept changed (the writer wrote one): report again.
  void Report();
  // An order from the scheduler (the heartbeat thread). Each generation is carried
  // out once; a failure is logged and not acknowledged (the scheduler's deadline
  // then fails the job naming this server).
  void OnOrder(const v1::RollbackOrder& order);
  // Called with the step after each rollback carried out, before it is acknowledged (an
  // elastic job's gate learns that the steps from there are taken again). Set before
  // Start.
  void SetOnLoaded(std::function<void(int64_t step)> on_loaded) { on_loaded_ = std::move(on_loaded); }

  // What Load does for an order, exposed for tests: the snapshot of `step` into the store.
  absl::Status Load(int64_t step);

 private:
  const std::string dir_;
  kv::ShardStore* const store_;
  SnapshotWriter* const writer_;
  const Reporter reporter_;
  absl::Mutex mu_;  // one order at a time
  std::function<void(int64_t step)> on_loaded_;
  int rank_ ABSL_GUARDED_BY(mu_) = -1;
  uint64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  // The order `done_` names, reported so that a restarted scheduler can take it up.
  int64_t done_step_ ABSL_GUARDED_BY(mu_) = 0;
  std::string done_reason_ ABSL_GUARDED_BY(mu_);
  bool shard_lost_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dtrain::server
