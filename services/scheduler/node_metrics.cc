#include "services/scheduler/node_metrics.h"

#include <map>
#include <string>
#include <utility>

#include "services/scheduler/membership_proto.h"

namespace dtrain::scheduler {

std::string StateLabel(v1::NodeState state) {
  switch (state) {
    case v1::NODE_STATE_REGISTERED: return "registered";
    case v1::NODE_STATE_ALIVE: return "alive";
    case v1::NODE_STATE_DEAD: return "dead";
    case v1::NODE_STATE_FINISHED: return "finished";
    case v1::NODE_STATE_REJOINING: return "rejoining";
    default: return "unknown";
  }
}

void RecordNodeMetrics(const std::vector<v1::NodeInfo>& nodes, const std::optional<v1::WorkerLag>& lag,
                       scheduler::SchedulerMetrics& out) {
  std::map<std::pair<Role, std::string>, int64_t> counts;
  for (Role role : {Role::kWorker, Role::kServer}) {
    for (const char* state : {"registered", "alive", "dead", "finished", "rejoining"}) counts[{role, state}] = 0;
  }
  for (const v1::NodeInfo& n : nodes) {
    // The scheduler's own nodes always have a role; one without has no series to count in.
    const absl::StatusOr<Role> role = RoleFromProto(n.role());
    if (role.ok()) ++counts[{*role, StateLabel(n.state())}];
  }
  for (const auto& [key, count] : counts) out.SetNodeCount(key.first, key.second, count);
  if (lag) out.SetWorkerSteps(lag->slowest_step(), lag->slowest_rank(), lag->fastest_step());
}

}  // namespace dtrain::scheduler
