// SIGTERM (or SIGINT) to a worker of an elastic job (docs/elastic.md): instead of
// dying it asks the scheduler to take it out of the job (ClusterElastic::AnnounceLeave)
// and keeps stepping until a push is refused by a generation without it, where the
// trainer ends it (exit 0). A refusal (too few workers would remain) is logged with the
// scheduler's reason, and the worker goes on as if no signal came; the launcher's or
// Kubernetes' kill after its grace period ends it then.
#pragma once

#include <atomic>
#include <thread>

#include "common/shutdown_signal.h"
#include "services/worker/cluster_elastic.h"

namespace dtrain::worker {

class LeaveOnSignal {
 public:
  // Waits on `signal` from a thread of its own; both must outlive this.
  LeaveOnSignal(ShutdownSignal& signal, ClusterElastic& cluster);
  ~LeaveOnSignal();  // ends the wait (ShutdownSignal::Request) and joins the thread
  LeaveOnSignal(const LeaveOnSignal&) = delete;
  LeaveOnSignal& operator=(const LeaveOnSignal&) = delete;

  // Whether the scheduler accepted this worker's leave.
  bool leaving() const { return leaving_.load(); }

 private:
  void Run();

  ShutdownSignal& signal_;
  ClusterElastic& cluster_;
  std::atomic<bool> done_{false};
  std::atomic<bool> leaving_{false};
  std::thread thread_;  // last: starts once the members above are set
};

}  // namespace dtrain::worker
