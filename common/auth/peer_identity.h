// Who a TLS peer is, from its certificate's name, and what that name lets it do.
//
// The job's CA signs every certificate; the name says which part of the job it is
// (common/tls/cert_authority.h, `dtrain certs`, the chart's cert-manager
// Certificates). The first DNS label of the CN is the identity:
//   ROLE-RANK  (worker-1, server-0, scheduler-0)  that role and rank only
//   ROLE       (worker, server, scheduler)        any rank of that role
//   node                                          any role and rank (one shared certificate)
//   operator                                      reads the job's state (dtrain status), never joins
//   anything else (infer, client)                 neither joins nor reads
// A certificate binds a process to a role and rank when it registers; afterwards the
// scheduler's per-incarnation token (node_token.h) binds each call to the incarnation.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/role.h"

namespace dtrain::auth {

struct PeerIdentity {
  enum class Kind {
    kNone,      // no certificate (plaintext, or a TLS client that presented none)
    kNode,      // a cluster role: `role`, and `rank` (-1: any rank of the role)
    kAnyNode,   // "node": any role and rank
    kOperator,  // "operator"
    kOther,     // a certificate of the job's CA for something else (infer, client)
  };
  Kind kind = Kind::kNone;
  std::optional<Role> role;  // kNode: the role its name spells; empty otherwise
  int rank = -1;             // kNode: the rank, or -1 for any
  std::string name;          // the CN as presented, for messages ("worker-1.mnist"); "" for kNone
};

// The identity a certificate's common name gives (empty: kNone).
PeerIdentity IdentityFromCommonName(absl::string_view common_name);

// "certificate worker-1.mnist" / "no client certificate": for messages.
std::string Describe(const PeerIdentity& id);

// Whether `id` may register as `role` (a server or a worker) with `requested_rank`
// (-1: any). When the certificate names one rank, *rank_to_request is set to it (a
// node started without a rank gets the one its certificate names); otherwise it is
// left as it was. PERMISSION_DENIED naming the certificate and what it asked for.
absl::Status MayRegisterAs(const PeerIdentity& id, Role role, int requested_rank, int* rank_to_request);

}  // namespace dtrain::auth
