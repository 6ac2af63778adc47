// Role on the wire: v1::Role both ways, in this one place.
#pragma once

#include "absl/status/statusor.h"
#include "common/role.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain {

v1::Role ToProto(Role role);
// ROLE_UNSPECIFIED (an older client, or none said) and unknown numbers are
// INVALID_ARGUMENT naming the value: every request that carries a role must say which.
absl::StatusOr<Role> RoleFromProto(v1::Role role);

}  // namespace dtrain
