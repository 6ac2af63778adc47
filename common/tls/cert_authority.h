// A small certificate authority for one job: `dtrain launch --tls` makes a throwaway
// one per run, `dtrain certs` one for hand launches. ECDSA P-256 keys (cheap
// handshakes), SHA-256 signatures, every leaf usable as TLS server and client.
//
// A leaf's identity is its name, "ROLE-RANK.JOB" (worker-1.mnist), as CN and as a
// DNS SAN, so that a later step can bind a connection to the rank it claims
// (docs/security.md). Extra SANs (host names, IPs) are for tools that check them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/role.h"

namespace dtrain::tls {

struct KeyAndCert {
  std::string key_pem;   // PKCS#8 private key
  std::string cert_pem;  // the certificate
};

class CertAuthority {
 public:
  // A new CA named "dtrain CA JOB", valid for `validity` from an hour ago (clock skew).
  static absl::StatusOr<CertAuthority> Create(const std::string& job, absl::Duration validity);
  // An existing CA, from its PEM files' contents; errors name what does not parse.
  static absl::StatusOr<CertAuthority> Load(const std::string& key_pem, const std::string& cert_pem);

  // A leaf certificate for `name` (CN and DNS SAN), plus `extra_sans`: each an IP
  // address (IP SAN) or a host name (DNS SAN).
  absl::StatusOr<KeyAndCert> Issue(const std::string& name, const std::vector<std::string>& extra_sans,
                                   absl::Duration validity) const;

  const KeyAndCert& ca() const { return ca_; }

 private:
  explicit CertAuthority(KeyAndCert ca) : ca_(std::move(ca)) {}
  KeyAndCert ca_;
};

// Writes DIR/STEM.key (mode 0600) and DIR/STEM.crt (0644), each atomically; the key
// first, so a .crt never names a key that is not there yet. Returns the two paths.
absl::StatusOr<std::pair<std::string, std::string>> WriteKeyAndCert(const std::string& dir, const std::string& stem,
                                                                    const KeyAndCert& kc);

// "worker-1.JOB": the name a process's certificate carries (worker 1), as
// auth::IdentityFromCommonName reads it back.
std::string LeafName(Role role, int rank, const std::string& job);

}  // namespace dtrain::tls
