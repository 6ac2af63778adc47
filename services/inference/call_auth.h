// Who may call Predict and ModelInfo: a client that presented a certificate from the
// server's CA (checked in the TLS handshake), or one that sends a bearer token listed
// in --auth-token-file ("authorization: Bearer TOKEN"). The health service is not
// behind this: probes stay open.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtrain::inference {

class CallAuth {
 public:
  // Anyone may call: plaintext or TLS without --tls-ca, and no token file.
  CallAuth() = default;

  // `token_file`: one token a line, blank lines and '#' comments skipped (empty path:
  // none). `client_certs`: a verified client certificate is enough. INVALID_ARGUMENT
  // naming the file: unreadable, no token, a token under 16 characters.
  static absl::StatusOr<CallAuth> Create(const std::string& token_file, bool client_certs);

  bool open() const { return tokens_.empty() && !client_certs_; }

  // OK, or UNAUTHENTICATED saying what the server accepts.
  absl::Status Check(const grpc::ServerContext& ctx) const;

 private:
  std::vector<std::string> tokens_;
  bool client_certs_ = false;
};

}  // namespace dtrain::inference
