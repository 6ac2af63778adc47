// Turns the scheduler's node list into its gauges: nodes by role and state, and the
// slowest and fastest worker's step. gRPC-free; called from SchedulerService::Tick.
#pragma once

#include <optional>
#include <vector>

#include "services/scheduler/scheduler_metrics.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::scheduler {

// The step gauges come from `lag` (WorkerLagTracker: steps sampled at one moment);
// without one (no tick every worker reported yet) they keep their last values.
void RecordNodeMetrics(const std::vector<v1::NodeInfo>& nodes, const std::optional<v1::WorkerLag>& lag,
                       scheduler::SchedulerMetrics& out);

// "registered", "alive", "dead", "finished" (lower case, as in the metric's labels).
std::string StateLabel(v1::NodeState state);

}  // namespace dtrain::scheduler
