#include "services/inference/call_auth.h"

#include <openssl/crypto.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/tls/token_file.h"

namespace dtrain::inference {
namespace {

constexpr char kBearer[] = "Bearer ";

bool SameToken(absl::string_view a, const std::string& b) {
  // Constant time over the length, so a wrong token's timing tells nothing of the right one.
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

absl::StatusOr<CallAuth> CallAuth::Create(const std::string& token_file, bool client_certs) {
  CallAuth auth;
  auth.client_certs_ = client_certs;
  if (!token_file.empty()) {
    absl::StatusOr<std::vector<std::string>> tokens = ReadTokenFile(token_file, "--auth-token-file");
    if (!tokens.ok()) return tokens.status();
    auth.tokens_ = *std::move(tokens);
  }
  return auth;
}

absl::Status CallAuth::Check(const grpc::ServerContext& ctx) const {
  if (open()) return absl::OkStatus();
  // With a CA the server asks for a client certificate and the handshake refuses one
  // that does not verify; a peer identity here is one that did.
  if (client_certs_) {
    std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
    if (auth != nullptr && auth->IsPeerAuthenticated()) return absl::OkStatus();
  }
  const auto& md = ctx.client_metadata();
  for (auto it = md.find("authorization"); it != md.end() && it->first == "authorization"; ++it) {
    const absl::string_view value(it->second.data(), it->second.size());
    if (!absl::StartsWith(value, kBearer)) continue;
    const absl::string_view token = value.substr(sizeof(kBearer) - 1);
    for (const std::string& t : tokens_) {
      if (SameToken(token, t)) return absl::OkStatus();
    }
    return absl::UnauthenticatedError("the bearer token is not one this server accepts");
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "this server wants ", client_certs_ && !tokens_.empty() ? "a client certificate from its CA or a bearer token"
                            : client_certs_
                                ? "a client certificate from its CA (--tls-cert/--tls-key)"
                                : "a bearer token (authorization: Bearer TOKEN; dtrain predict --auth-token-file)"));
}

}  // namespace dtrain::inference
