// A node's role in a job: the one C++ type for it. The wire spells it v1::Role; the
// command line, certificates and log lines spell it "scheduler", "server", "worker".
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain {

enum class Role { kScheduler, kServer, kWorker };

// "scheduler", "server" or "worker".
const char* RoleName(Role role);
// The inverse of RoleName; anything else is INVALID_ARGUMENT listing the three.
absl::StatusOr<Role> ParseRole(absl::string_view name);

v1::Role ToProto(Role role);
// ROLE_UNSPECIFIED (an older client, or none said) and unknown numbers are
// INVALID_ARGUMENT: every request that carries a role must say which.
absl::StatusOr<Role> RoleFromProto(v1::Role role);

}  // namespace dtrain
