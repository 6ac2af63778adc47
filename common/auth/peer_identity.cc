#include "common/auth/peer_identity.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dtrain::auth {

PeerIdentity IdentityFromCommonName(absl::string_view common_name) {
  PeerIdentity id;
  if (common_name.empty()) return id;
  id.name = std::string(common_name);
  const absl::string_view label = common_name.substr(0, common_name.find('.'));
  if (label == "node") {
    id.kind = PeerIdentity::Kind::kAnyNode;
  } else if (label == "operator") {
    id.kind = PeerIdentity::Kind::kOperator;
  } else if (absl::StatusOr<Role> role = ParseRole(label); role.ok()) {
    id.kind = PeerIdentity::Kind::kNode;
    id.role = *role;
  } else {
    id.kind = PeerIdentity::Kind::kOther;
    const size_t dash = label.rfind('-');
    int rank = -1;
    // A name that is no role ("client", "infer") is not an error: it is kOther.
    // Without a dash this parses the whole label again, which is no role (above).
    const absl::StatusOr<Role> ranked_role = ParseRole(label.substr(0, dash));
    // "worker-1": only digits after the dash, no sign or leading junk.
    if (ranked_role.ok() && dash + 1 < label.size() &&
        label.substr(dash + 1).find_first_not_of("0123456789") == absl::string_view::npos &&
        label.size() - dash - 1 <= 9 && absl::SimpleAtoi(label.substr(dash + 1), &rank)) {
      id.kind = PeerIdentity::Kind::kNode;
      id.role = *ranked_role;
      id.rank = rank;
    }
  }
  return id;
}

std::string Describe(const PeerIdentity& id) {
  if (id.kind == PeerIdentity::Kind::kNone) return "no client certificate";
  return absl::StrCat("certificate ", id.name);
}

absl::Status MayRegisterAs(const PeerIdentity& id, Role role, int requested_rank, int* rank_to_request) {
  const std::string asked =
      requested_rank >= 0 ? absl::StrCat(RoleName(role), " ", requested_rank) : absl::StrCat("a ", RoleName(role));
  switch (id.kind) {
    case PeerIdentity::Kind::kAnyNode: return absl::OkStatus();
    case PeerIdentity::Kind::kNode:
      if (id.role != role) break;
      if (id.rank < 0) return absl::OkStatus();
      if (requested_rank >= 0 && requested_rank != id.rank) break;
      *rank_to_request = id.rank;
      return absl::OkStatus();
    default: break;
  }
  return absl::PermissionDeniedError(absl::StrCat(Describe(id), " may not register as ", asked));
}

}  // namespace dtrain::auth
