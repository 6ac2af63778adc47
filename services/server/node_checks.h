// Which job node may make which parameter-server call, once the job runs with TLS
// (docs/security.md, "Identity bound to rank"). The rules, in one place:
//   PushPull     a worker's token; every request of the stream speaks for that
//                worker's rank and incarnation, and no other (push_pull_handler.cc)
//   GetVersions  a worker's token, for the rank and incarnation it asks about
//   Configure,   worker 0's token (it sets the job up), or a server's (a chain partner
//   InitKeys     copying a restarted replica its keys back)
//   GetState     a worker's token, or an operator certificate (weights and optimizer
//                state are the job's own)
// A worker token must also pass the store's fence: a replaced incarnation's is dead.
#pragma once

#include <optional>
#include "absl/strings/string_view.h"

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/auth/node_auth.h"
#include "common/kv/shard_store.h"

namespace dtrain::server {

class NodeChecks {
 public:
  // `keyring` null: nothing is checked (plaintext, a standalone server). Both must
  // outlive this.
  NodeChecks(const auth::TokenKeyring* keyring, absl::Duration key_wait, kv::ShardStore* store)
      : keyring_(keyring), key_wait_(key_wait), store_(store) {}

  bool enforcing() const { return keyring_ != nullptr; }

  // Each: OK, or the refusal (logged with the peer's address). `what` names the call.
  absl::Status ForSetup(const grpc::ServerContextBase& ctx, absl::string_view what) const;
  absl::Status ForVersions(const grpc::ServerContextBase& ctx, int worker_rank, uint64_t incarnation) const;
  absl::Status ForState(const grpc::ServerContextBase& ctx) const;
  // The worker a PushPull stream speaks for (nullopt when not enforcing).
  absl::StatusOr<std::optional<auth::TokenClaims>> ForStream(const grpc::ServerContextBase& ctx) const;

 private:
  auth::Caller Identify(const grpc::ServerContextBase& ctx) const;
  // A worker token's incarnation may not be one the store fenced.
  absl::Status NotFenced(const auth::TokenClaims& token) const;

  const auth::TokenKeyring* keyring_;
  absl::Duration key_wait_;
  kv::ShardStore* store_;
};

}  // namespace dtrain::server
