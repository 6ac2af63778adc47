#include "common/auth/node_auth.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace dtrain::auth {
namespace {

std::string Who(const Caller& c) {
  return c.token ? absl::StrCat(Describe(c.identity), " holding a token of ", Describe(*c.token))
                 : Describe(c.identity);
}

absl::Status NoToken(const Caller& c, absl::string_view what) {
  return absl::UnauthenticatedError(
      absl::StrCat(what, " refused: ", Describe(c.identity), " sent ",
                   c.token_error.ok() ? std::string("no node token") : std::string(c.token_error.message()),
                   " (a node gets its token when it registers)"));
}

}  // namespace

Caller IdentifyCaller(const grpc::ServerContextBase& ctx, absl::string_view token_key) {
  Caller c;
  c.peer = ctx.peer();
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth != nullptr) {
    for (const grpc::string_ref& cn : auth->FindPropertyValues("x509_common_name")) {
      c.identity = IdentityFromCommonName(absl::string_view(cn.data(), cn.size()));
      break;
    }
  }
  const auto& md = ctx.client_metadata();
  auto it = md.find(kTokenMetadataKey);
  if (it != md.end()) {
    absl::StatusOr<TokenClaims> claims =
        VerifyToken(token_key, absl::string_view(it->second.data(), it->second.size()));
    if (claims.ok()) {
      c.token = *claims;
    } else {
      c.token_error = claims.status();
    }
  }
  return c;
}

absl::Status RequireNode(const Caller& caller, Role role, int rank, uint64_t incarnation, absl::string_view what) {
  if (!caller.token) return NoToken(caller, what);
  const TokenClaims& t = *caller.token;
  if (t.role == role && t.rank == rank && incarnation == t.incarnation) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(what, " refused: ", Who(caller), " may not act as ", RoleName(role),
                                                  " ", rank, " incarnation ", incarnation));
}

absl::Status RequireAnyOf(const Caller& caller, absl::string_view what,
                          const std::function<bool(const TokenClaims&)>& allowed) {
  if (!caller.token) return NoToken(caller, what);
  if (allowed(*caller.token)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(what, " refused: ", Who(caller), " may not call it"));
}

absl::Status RequireReader(const Caller& caller, absl::string_view what) {
  const PeerIdentity& id = caller.identity;
  const bool scheduler_cert =
      id.kind == PeerIdentity::Kind::kAnyNode || (id.kind == PeerIdentity::Kind::kNode && id.role == Role::kScheduler);
  if (id.kind == PeerIdentity::Kind::kOperator || scheduler_cert || caller.token) return absl::OkStatus();
  if (!caller.token_error.ok()) return NoToken(caller, what);
  return absl::PermissionDeniedError(absl::StrCat(
      what, " refused: ", Describe(caller.identity),
      " is neither a node of this job (no node token) nor an operator's (a certificate named operator.JOB)"));
}

absl::Status Refused(const Caller& caller, absl::Status refused) {
  DTRAIN_LOG(WARNING) << "refused a call from " << caller.peer << ": " << refused.message();
  return refused;
}

}  // namespace dtrain::auth
