// Checks a process's TLS files before it serves or dials anything, so that a wrong
// file is a start-up error naming it rather than a handshake that fails later with
// gRPC's terse "ssl handshake failed" on the other side.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace dtrain::tls {

struct PemFiles {
  std::string cert_path, key_path, ca_path;  // for the messages
  std::string cert_pem, key_pem, ca_pem;     // contents; cert/key or ca may be empty
};

// INVALID_ARGUMENT naming the file when: a file holds no PEM of its kind, the key is
// not the certificate's, or the certificate does not chain to the CA (expired,
// another CA's: the OpenSSL reason is given).
absl::Status CheckPemFiles(const PemFiles& files);

}  // namespace dtrain::tls
