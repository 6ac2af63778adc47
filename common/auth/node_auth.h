// The checks a cluster service (scheduler, parameter server) makes of each call once
// the job runs with TLS: who the peer's certificate says it is (peer_identity.h) and
// which role, rank and incarnation its token (node_token.h) was issued for.
//
// Without TLS there is nothing to check: the `Enforcing()` switch is off and every
// check passes (plaintext is for trusted networks only; docs/security.md).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/auth/node_token.h"
#include "common/auth/peer_identity.h"

namespace dtrain::auth {

// What one call's peer proved.
struct Caller {
  std::string peer;                  // "ipv4:127.0.0.1:51234", for log lines
  PeerIdentity identity;             // from its certificate
  std::optional<TokenClaims> token;  // a token of this job, checked
  absl::Status token_error;          // why `token` is empty, when one was sent
};

// Reads the call's certificate name and token. `token_key` "" (a server that has no
// key yet) makes any token fail to verify.
Caller IdentifyCaller(const grpc::ServerContextBase& ctx, absl::string_view token_key);

// The caller holds a token for exactly this role, rank and incarnation (a request that
// says incarnation 0 matches no token: with TLS every node knows its incarnation, and
// 0 would mean "whoever holds the rank now"). PERMISSION_DENIED (UNAUTHENTICATED without a valid
// token) naming the certificate and what it tried to act as; `what` names the call.
absl::Status RequireNode(const Caller& caller, Role role, int rank, uint64_t incarnation, absl::string_view what);

// The caller holds a token for `role` (any rank): servers answer their shard's
// Configure/InitKeys only to worker 0 and to the other servers (replica catch-up).
absl::Status RequireAnyOf(const Caller& caller, absl::string_view what,
                          const std::function<bool(const TokenClaims&)>& allowed);

// Reading the job's state (GetStatus, GetState): the job's own nodes (a valid token),
// an operator certificate, or the scheduler's own certificate (`kubectl exec` into the
// scheduler's pod runs `dtrain status` with it: the scheduler is the job's root of
// trust anyway). Other node certificates without their token are refused.
absl::Status RequireReader(const Caller& caller, absl::string_view what);

// Logs one line naming the peer and the refusal (the text of `refused`), and returns it.
absl::Status Refused(const Caller& caller, absl::Status refused);

}  // namespace dtrain::auth
