#include "services/scheduler/node_metrics.h"

#include <map>
#include <string>
#include <utility>

#include "services/scheduler/membership.h"

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

void RecordNodeMetrics(const std::vector<v1::NodeInfo>& nodes, scheduler::SchedulerMetrics& out) {
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  for (const char* role : {"worker", "server"}) {
    for (const char* state : {"registered", "alive", "dead", "finished", "rejoining"}) counts[{role, state}] = 0;
  }
  bool any_worker = false;
  int64_t slowest = 0, fastest = 0;
  int slowest_rank = -1;
  for (const v1::NodeInfo& n : nodes) {
    ++counts[{RoleName(n.role()), StateLabel(n.state())}];
    if (n.role() != v1::ROLE_WORKER || n.state() == v1::NODE_STATE_DEAD) continue;
    if (!any_worker || n.last_step() < slowest) {
      slowest = n.last_step();
      slowest_rank = n.rank();
    }
    if (!any_worker || n.last_step() > fastest) fastest = n.last_step();
    any_worker = true;
  }
  for (const auto& [key, count] : counts) out.SetNodeCount(key.first, key.second, count);
  if (any_worker) out.SetWorkerSteps(slowest, slowest_rank, fastest);
}

}  // namespace dtrain::scheduler
