// Per-incarnation tokens: the scheduler's word that a process registered as a role,
// rank and incarnation (docs/security.md, "Identity bound to rank").
//
// A token is "ROLE.RANK.INCARNATION.MAC", the MAC an HMAC-SHA256 of the first three
// under the job's token key. The scheduler derives that key from its own TLS private
// key, so a restarted scheduler (same certificate) issues and accepts the same tokens,
// and hands it to the servers at registration so that they can check workers' calls
// without asking the scheduler. A token is sent as gRPC metadata (kTokenMetadataKey)
// on every call of a TLS channel (common/credentials.h), never logged.
//
// A token names one incarnation: once a new process takes the rank, the old token's
// incarnation is fenced (docs/recovery.md), so a token stolen from a dead process
// opens nothing.
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/role.h"

namespace dtrain::auth {

inline constexpr char kTokenMetadataKey[] = "x-dtrain-token";

struct TokenClaims {
  // kServer or kWorker: tokens are minted for registered nodes only, and a token text
  // naming any other role does not verify. Spelled RoleName(role) in the token.
  Role role = Role::kWorker;
  int rank = -1;
  uint64_t incarnation = 0;
  bool operator==(const TokenClaims& o) const {
    return role == o.role && rank == o.rank && incarnation == o.incarnation;
  }
};

// The token key of a scheduler whose private key is `private_key_pem` (32 bytes; the
// HMAC of a fixed label under the PEM, so the key itself is never revealed by it).
std::string DeriveTokenKey(absl::string_view private_key_pem);

std::string MintToken(absl::string_view key, const TokenClaims& claims);

// The claims of a token made with `key`. UNAUTHENTICATED saying what is wrong (not
// well formed, or not made with this key); the token itself is never echoed.
absl::StatusOr<TokenClaims> VerifyToken(absl::string_view key, absl::string_view token);

// "worker 1 incarnation 2": for messages.
std::string Describe(const TokenClaims& claims);

// The token key, as a server gets it from its RegisterResponse: calls that arrive
// before it (a worker that heard of the server a moment before the server heard back
// from the scheduler) wait for it a little.
class TokenKeyring {
 public:
  void Set(std::string key);
  // The key, waiting until `deadline` for it; "" if it has not come.
  std::string Get(absl::Time deadline) const;

 private:
  mutable absl::Mutex mu_;
  std::string key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dtrain::auth
