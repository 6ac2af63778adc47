#include "services/scheduler/membership_types.h"

#include "absl/strings/str_cat.h"

namespace dtrain::scheduler {

std::string NodeName(const NodeKey& key) { return absl::StrCat(RoleName(key.role), " ", key.rank); }

std::string StateName(NodeState state) {
  switch (state) {
    case NodeState::kRegistered: return "NODE_STATE_REGISTERED";
    case NodeState::kAlive: return "NODE_STATE_ALIVE";
    case NodeState::kDead: return "NODE_STATE_DEAD";
    case NodeState::kFinished: return "NODE_STATE_FINISHED";
    case NodeState::kRejoining: return "NODE_STATE_REJOINING";
    default: return "NODE_STATE_UNSPECIFIED";
  }
}

}  // namespace dtrain::scheduler
