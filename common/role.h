// A node's role in a job: the one C++ type for it. The wire spells it v1::Role
// (common/role_wire.h); the command line, certificates, tokens and log lines spell it
// "scheduler", "server", "worker".
//
// There is no "unspecified" role. The wire has ROLE_UNSPECIFIED (a request that names
// none), but that is refused where the wire is read (RoleFromProto), and a text that
// names no role where a text is read (ParseRole); past those two places every role is
// one of the three. Where a role may be absent, the C++ says so: std::optional<Role>
// (the launcher's JobSpecFlags, a certificate that names no role).
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtrain {

// In the wire's order (scheduler, server, worker): sorted by role, servers come first.
enum class Role { kScheduler, kServer, kWorker };

// "scheduler", "server" or "worker".
const char* RoleName(Role role);
// The inverse of RoleName; anything else is INVALID_ARGUMENT naming the text and
// listing the three.
absl::StatusOr<Role> ParseRole(absl::string_view name);

}  // namespace dtrain
