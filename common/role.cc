#include "common/role.h"

#include "absl/strings/str_cat.h"

namespace dtrain {

const char* RoleName(Role role) {
  switch (role) {
    case Role::kScheduler: return "scheduler";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
  }
  return "?";
}

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (Role r : {Role::kScheduler, Role::kServer, Role::kWorker}) {
    if (name == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown role '", name, "' (known: scheduler, server, worker)"));
}

}  // namespace dtrain
