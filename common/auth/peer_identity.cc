#include "common/auth/peer_identity.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/role.h"

namespace dtrain::auth {
namespace {

bool IsClusterRole(absl::string_view role) { return ParseRole(role).ok(); }

}  // namespace

PeerIdentity IdentityFromCommonName(absl::string_view common_name) {
  PeerIdentity id;
  if (common_name.empty()) return id;
  id.name = std::string(common_name);
  const absl::string_view label = common_name.substr(0, common_name.find('.'));
  if (label == "node") {
    id.kind = PeerIdentity::Kind::kAnyNode;
  } else if (label == "operator") {
    id.kind = PeerIdentity::Kind::kOperator;
  } else if (IsClusterRole(label)) {
    id.kind = PeerIdentity::Kind::kNode;
    id.role = std::string(label);
  } else {
    id.kind = PeerIdentity::Kind::kOther;
    const size_t dash = label.rfind('-');
    int rank = -1;
    // "worker-1": only digits after the dash, no sign or leading junk.
    if (dash != absl::string_view::npos && dash + 1 < label.size() && IsClusterRole(label.substr(0, dash)) &&
        label.substr(dash + 1).find_first_not_of("0123456789") == absl::string_view::npos &&
        label.size() - dash - 1 <= 9 && absl::SimpleAtoi(label.substr(dash + 1), &rank)) {
      id.kind = PeerIdentity::Kind::kNode;
      id.role = std::string(label.substr(0, dash));
      id.rank = rank;
    }
  }
  return id;
}

std::string Describe(const PeerIdentity& id) {
  if (id.kind == PeerIdentity::Kind::kNone) return "no client certificate";
  return absl::StrCat("certificate ", id.name);
}

absl::Status MayRegisterAs(const PeerIdentity& id, absl::string_view role, int requested_rank, int* rank_to_request) {
  const std::string asked = requested_rank >= 0 ? absl::StrCat(role, " ", requested_rank) : absl::StrCat("a ", role);
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
