#include "services/server/node_checks.h"

#include "absl/strings/str_cat.h"

namespace dtrain::server {
namespace {

bool IsWorker(const auth::TokenClaims& t) { return t.role == Role::kWorker; }

}  // namespace

auth::Caller NodeChecks::Identify(const grpc::ServerContextBase& ctx) const {
  return auth::IdentifyCaller(ctx, keyring_->Get(absl::Now() + key_wait_));
}

absl::Status NodeChecks::NotFenced(const auth::TokenClaims& token) const {
  if (!IsWorker(token)) return absl::OkStatus();
  return store_->AdmitWorker(token.rank, "", token.incarnation);
}

absl::Status NodeChecks::ForSetup(const grpc::ServerContextBase& ctx, absl::string_view what) const {
  if (!enforcing()) return absl::OkStatus();
  const auth::Caller caller = Identify(ctx);
  absl::Status s = auth::RequireAnyOf(
      caller, what, [](const auth::TokenClaims& t) { return t.role == Role::kServer || (IsWorker(t) && t.rank == 0); });
  if (s.ok()) s = NotFenced(*caller.token);
  return s.ok() ? s : auth::Refused(caller, s);
}

absl::Status NodeChecks::ForVersions(const grpc::ServerContextBase& ctx, int worker_rank, uint64_t incarnation) const {
  if (!enforcing()) return absl::OkStatus();
  const auth::Caller caller = Identify(ctx);
  absl::Status s = worker_rank >= 0 ? auth::RequireNode(caller, Role::kWorker, worker_rank, incarnation, "GetVersions")
                                    : auth::RequireAnyOf(caller, "GetVersions", IsWorker);
  if (s.ok()) s = NotFenced(*caller.token);
  return s.ok() ? s : auth::Refused(caller, s);
}

absl::Status NodeChecks::ForState(const grpc::ServerContextBase& ctx) const {
  if (!enforcing()) return absl::OkStatus();
  const auth::Caller caller = Identify(ctx);
  absl::Status s;
  if (caller.identity.kind != auth::PeerIdentity::Kind::kOperator) {
    s = auth::RequireAnyOf(caller, "GetState", IsWorker);
    if (s.code() == absl::StatusCode::kUnauthenticated) {
      s = absl::PermissionDeniedError(absl::StrCat(
          s.message(), "; only the job's workers and an operator certificate (operator.JOB) may read its state"));
    }
    if (s.ok()) s = NotFenced(*caller.token);
  }
  return s.ok() ? s : auth::Refused(caller, s);
}

absl::StatusOr<std::optional<auth::TokenClaims>> NodeChecks::ForStream(const grpc::ServerContextBase& ctx) const {
  if (!enforcing()) return std::optional<auth::TokenClaims>();
  const auth::Caller caller = Identify(ctx);
  absl::Status s = auth::RequireAnyOf(caller, "PushPull", IsWorker);
  if (!s.ok()) return auth::Refused(caller, s);
  return caller.token;
}

}  // namespace dtrain::server
