// Membership's plain values to and from the wire (scheduler.proto), for the service.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/role_wire.h"
#include "dtrain/v1/scheduler.pb.h"
#include "services/scheduler/membership_types.h"

namespace dtrain::scheduler {

// The roles convert with common/role_wire.h's ToProto and RoleFromProto. A request that
// names no role (ROLE_UNSPECIFIED) or one this build does not know is
// INVALID_ARGUMENT here, where the wire is read, naming the request and the value.

// The node a request speaks for; `what` names the request ("HeartbeatRequest").
absl::StatusOr<NodeKey> KeyOf(v1::Role role, int rank, const char* what);

absl::StatusOr<Registration> RegistrationFromProto(const v1::RegisterRequest& request);
EpochFigures EpochFromProto(const v1::EpochReport& report);
v1::NodeInfo NodeToProto(const NodeRecord& node);
std::vector<v1::NodeInfo> NodesToProto(const std::vector<NodeRecord>& nodes);
v1::ClusterView ViewToProto(const ClusterShape& view);

}  // namespace dtrain::scheduler
