// Rollback to the servers' snapshots (docs/recovery.md "Servers: snapshots
// and rollback"). Knows nothing of gRPC.
//
// A server process replaced by a new incarnation lost its shard (with replication 1 no
// other copy exists). Once every server has said which complete snapshots it holds
// (SnapshotReport.listed), the coordinator picks S, the newest step every server has,
// and orders a rollback: the servers reload S and acknowledge; once all did, the
// workers are told to pull exactly version S and resume there. No step in common:
// the job fails, saying so.
//
// A coordinator that restarted with the scheduler knows nothing of the orders given
// before it: the servers report the last one they carried out (step and reason too) and
// whether their shard is lost (a replacement holding nothing), so it takes up an order
// in progress and sees a loss it did not witness.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::scheduler {

class RollbackCoordinator {
 public:
  // `deadline`: how long a rollback may wait for the servers to list and reload their
  // snapshots before the job fails naming the ones missing.
  RollbackCoordinator(int num_servers, absl::Duration deadline);

  // A server's heartbeat. `job_step`: where the job is (the workers' furthest step),
  // for the log line. Returns the order this server must carry out, if any.
  std::optional<v1::RollbackOrder> OnServerHeartbeat(int rank, uint64_t incarnation, const v1::SnapshotReport& report,
                                                     int64_t job_step, absl::Time now);
  // The order for the workers: set once every server acknowledged it.
  std::optional<v1::RollbackOrder> ForWorkers() const;
  // Whether order `generation` was taken up from the servers' reports (this scheduler
  // restarted during it) rather than given here: it then goes only to the workers
  // that say they wait for it, since which ones carried it out before is not known.
  bool TakenUp(uint64_t generation) const;
  // Every server has reported its snapshots: a server's death can be rolled back.
  bool Enabled() const;
  // Fails a rollback waiting past its deadline (call every tick).
  void Check(absl::Time now);
  // Non-empty once the job cannot go on: no snapshot step in common, or the servers
  // did not reload in time.
  std::string Failure() const;
  int64_t rollbacks() const;
  std::string last_rollback() const;  // the last order's reason
  // The complete snapshot steps server `rank` reported last, newest first.
  std::vector<int64_t> SnapshotSteps(int rank) const;
  // The newest step every server listed a complete snapshot of; nullopt when a server
  // has not listed yet or they have none in common.
  std::optional<int64_t> CommonStep() const;
  // Orders a rollback of the whole job to snapshot `step` (an elastic job's dead
  // worker whose last step merged on some keys, elastic_drop.h), carried out as a lost
  // shard's: the servers reload, then the workers are told. Returns its generation.
  uint64_t Order(int64_t step, const std::string& reason, absl::Time now);

 private:
  struct Server {
    uint64_t incarnation = 0;
    bool listed = false;
    std::vector<int64_t> steps;  // newest first
    uint64_t done = 0;           // generation acknowledged
  };
  void MaybeOrder(int64_t job_step, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_servers_;
  const absl::Duration deadline_;
  mutable absl::Mutex mu_;
  std::map<int, Server> servers_ ABSL_GUARDED_BY(mu_);
  std::map<int, int64_t> lost_ ABSL_GUARDED_BY(mu_);                        // rank -> job step when its loss was seen
  std::optional<v1::RollbackOrder> order_ ABSL_GUARDED_BY(mu_);             // the current (or last) order
  absl::Time waiting_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();  // a loss or order not done
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t taken_up_ ABSL_GUARDED_BY(mu_) = 0;  // an order taken up from the servers (0: none)
  int64_t rollbacks_ ABSL_GUARDED_BY(mu_) = 0;
  std::string failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtrain::scheduler
