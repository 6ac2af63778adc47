// The scheduler's metrics (dtrain_scheduler_*): nodes by role and state, deaths it
// detected, barrier waits, and how far the slowest worker trails the fastest.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "common/metrics/registry.h"
#include "common/role.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace dtrain::scheduler {

class SchedulerMetrics {
 public:
  // Node roles worker and server (labelled "worker", "server"); states "registered", "alive", "dead", "finished",
  // "rejoining"; barrier groups "workers", "servers", "all". Every combination is exported from the start (as 0), so a
  // dashboard sees a dead count of 0 rather than no data.
  explicit SchedulerMetrics(metrics::MetricsRegistry& registry);

  // Sets dtrain_scheduler_nodes{node_role, state}; the scheduler's role and unknown
  // states are ignored (no series has them).
  void SetNodeCount(Role node_role, const std::string& state, int64_t count);
  void NodeDied(Role node_role);
  // A new process took a rank after the job started (dtrain_scheduler_rejoins_total).
  void NodeRejoined(Role node_role);
  // A server died while its ranges have other replicas (--replication > 1): the
  // workers go on with the next one (dtrain_scheduler_failovers_total).
  void ServerFailedOver();
  void BarrierWaited(const std::string& group, double seconds, bool ok);
  // Over the workers still in the job, their steps sampled at one moment (worker_lag.h).
  void SetWorkerSteps(int64_t slowest_step, int slowest_rank, int64_t fastest_step);
  // The job rolled back to the servers' snapshots, losing `steps_lost` steps.
  void RolledBack(int64_t steps_lost);
  // The workers the job's latest membership generation holds (dtrain_workers): an
  // elastic job's moves with each committed change.
  void SetWorkers(int workers);

 private:
  std::map<std::pair<Role, std::string>, prometheus::Gauge*> nodes_;
  std::map<Role, prometheus::Counter*> deaths_;
  std::map<Role, prometheus::Counter*> rejoins_;
  std::map<std::string, prometheus::Histogram*> barrier_wait_;
  std::map<std::string, prometheus::Counter*> barrier_failures_;
  prometheus::Gauge* slowest_step_;
  prometheus::Gauge* slowest_rank_;
  prometheus::Gauge* fastest_step_;
  prometheus::Gauge* lag_;
  prometheus::Counter* rollbacks_;
  prometheus::Counter* steps_lost_;
  prometheus::Counter* failovers_;
  prometheus::Gauge* workers_;
};

}  // namespace dtrain::scheduler
