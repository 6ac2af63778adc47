// Membership's plain values to and from the wire (scheduler.proto), for the service.
#pragma once

#include <vector>

#include "dtrain/v1/scheduler.pb.h"
#include "services/scheduler/membership_types.h"

namespace dtrain::scheduler {

Role RoleFromProto(v1::Role role);  // an unknown role: kUnspecified
v1::Role RoleToProto(Role role);
NodeKey KeyOf(v1::Role role, int rank);
// "worker", for a role off the wire.
std::string RoleName(v1::Role role);

Registration RegistrationFromProto(const v1::RegisterRequest& request);
EpochFigures EpochFromProto(const v1::EpochReport& report);
v1::NodeInfo NodeToProto(const NodeRecord& node);
std::vector<v1::NodeInfo> NodesToProto(const std::vector<NodeRecord>& nodes);
v1::ClusterView ViewToProto(const ClusterShape& view);

}  // namespace dtrain::scheduler
