// Turns the scheduler's node list into its gauges: nodes by role and state, and the
// slowest and fastest worker's step. gRPC-free; called from SchedulerService::Tick.
#pragma once

#include <vector>

#include "services/scheduler/scheduler_metrics.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::scheduler {

// Steps count over the workers still in the job (not DEAD); with none, the step
// gauges keep their last values.
void RecordNodeMetrics(const std::vector<v1::NodeInfo>& nodes, scheduler::SchedulerMetrics& out);

// "registered", "alive", "dead", "finished" (lower case, as in the metric's labels).
std::string StateLabel(v1::NodeState state);

}  // namespace dtrain::scheduler
