#include "common/role_wire.h"

#include "absl/strings/str_cat.h"

namespace dtrain {

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
