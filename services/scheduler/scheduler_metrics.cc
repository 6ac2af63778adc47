#include "services/scheduler/scheduler_metrics.h"

#include "common/metrics/families.h"

namespace dtrain::scheduler {

using metrics::internal::AddCounter;
using metrics::internal::AddGauge;
using metrics::internal::AddHistogram;

SchedulerMetrics::SchedulerMetrics(metrics::MetricsRegistry& registry) {
  prometheus::Registry& r = registry.families();
  for (Role role : {Role::kWorker, Role::kServer}) {
    const char* label = RoleName(role);
    for (const char* state : {"registered", "alive", "dead", "finished", "rejoining"}) {
      nodes_[{role, state}] = &AddGauge(r, "dtrain_scheduler_nodes", "Nodes of the job by role and state.",
                                        {{"node_role", label}, {"state", state}});
    }
    deaths_[role] = &AddCounter(r, "dtrain_scheduler_deaths_total",
                                "Nodes declared dead (heartbeat stream broke or went silent).", {{"node_role", label}});
    rejoins_[role] =
        &AddCounter(r, "dtrain_scheduler_rejoins_total",
                    "New processes that took a rank after the job started (restarts).", {{"node_role", label}});
  }
  const std::vector<double> buckets = {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300};
  for (const char* group : {"workers", "servers", "all"}) {
    barrier_wait_[group] =
        &AddHistogram(r, "dtrain_scheduler_barrier_wait_seconds",
                      "Seconds a node waited at a barrier, by barrier group.", buckets, {{"group", group}});
    barrier_failures_[group] =
        &AddCounter(r, "dtrain_scheduler_barrier_failures_total",
                    "Barrier waits that failed (deadline, a member died, cancelled).", {{"group", group}});
  }
  slowest_step_ = &AddGauge(r, "dtrain_scheduler_slowest_worker_step",
                            "Lowest step of a worker still in the job, at the newest tick all of them sampled.");
  slowest_rank_ = &AddGauge(r, "dtrain_scheduler_slowest_worker_rank", "Rank of the worker at the lowest step.");
  fastest_step_ = &AddGauge(r, "dtrain_scheduler_fastest_worker_step",
                            "Highest step of a worker still in the job, at the newest tick all of them sampled.");
  failovers_ = &AddCounter(r, "dtrain_scheduler_failovers_total",
                           "Server deaths whose key ranges went on at another replica (--replication > 1).", {});
  lag_ = &AddGauge(r, "dtrain_scheduler_worker_lag_steps",
                   "Fastest worker's step minus the slowest one's, both sampled at the same moment "
                   "(at most 1 in dist_sync).");
  rollbacks_ = &AddCounter(r, "dtrain_scheduler_rollbacks_total",
                           "Rollbacks of the whole job to the servers' snapshots (a shard was lost).");
  workers_ = &AddGauge(r, "dtrain_workers",
                       "Workers of the latest committed membership generation (--elastic; else -n, set at start).");
  steps_lost_ = &AddCounter(r, "dtrain_scheduler_rollback_steps_lost_total",
                            "Steps recomputed because of rollbacks (the job's step minus the snapshot's).");
}

void SchedulerMetrics::SetNodeCount(Role node_role, const std::string& state, int64_t count) {
  auto it = nodes_.find({node_role, state});
  if (it != nodes_.end()) it->second->Set(static_cast<double>(count));
}

void SchedulerMetrics::NodeRejoined(Role node_role) {
  auto it = rejoins_.find(node_role);
  if (it != rejoins_.end()) it->second->Increment();
}

void SchedulerMetrics::NodeDied(Role node_role) {
  auto it = deaths_.find(node_role);
  if (it != deaths_.end()) it->second->Increment();
}

void SchedulerMetrics::ServerFailedOver() { failovers_->Increment(); }

void SchedulerMetrics::BarrierWaited(const std::string& group, double seconds, bool ok) {
  auto wait = barrier_wait_.find(group);
  if (wait != barrier_wait_.end()) wait->second->Observe(seconds);
  auto failures = barrier_failures_.find(group);
  if (!ok && failures != barrier_failures_.end()) failures->second->Increment();
}

void SchedulerMetrics::SetWorkerSteps(int64_t slowest_step, int slowest_rank, int64_t fastest_step) {
  slowest_step_->Set(static_cast<double>(slowest_step));
  slowest_rank_->Set(slowest_rank);
  fastest_step_->Set(static_cast<double>(fastest_step));
  lag_->Set(static_cast<double>(fastest_step - slowest_step));
}

void SchedulerMetrics::SetWorkers(int workers) { workers_->Set(workers); }

void SchedulerMetrics::RolledBack(int64_t steps_lost) {
  rollbacks_->Increment();
  steps_lost_->Increment(static_cast<double>(steps_lost));
}

}  // namespace dtrain::scheduler
