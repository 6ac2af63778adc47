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

v1::Role ToProto(Role role) {
  switch (role) {
    case Role::kScheduler: return v1::ROLE_SCHEDULER;
    case Role::kServer: return v1::ROLE_SERVER;
    case Role::kWorker: return v1::ROLE_WORKER;
  }
  return v1::ROLE_UNSPECIFIED;
}

absl::StatusOr<Role> RoleFromProto(v1::Role role) {
  switch (role) {
    case v1::ROLE_SCHEDULER: return Role::kScheduler;
    case v1::ROLE_SERVER: return Role::kServer;
    case v1::ROLE_WORKER: return Role::kWorker;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no role: ", v1::Role_Name(role).empty() ? absl::StrCat("value ", static_cast<int>(role)) : v1::Role_Name(role)));
}

}  // namespace dtrain
