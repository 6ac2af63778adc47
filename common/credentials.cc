#include "common/credentials.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/auth/node_token.h"

namespace dtrain {
namespace {

using grpc::experimental::IdentityKeyCertPair;
using grpc::experimental::StaticDataCertificateProvider;

absl::Mutex g_mu;
TransportSecurity* g_security ABSL_GUARDED_BY(g_mu) = nullptr;

TransportSecurity Current() {
  absl::MutexLock lock(&g_mu);
  return g_security == nullptr ? TransportSecurity{} : *g_security;
}

absl::Mutex g_token_mu;
std::string* g_token ABSL_GUARDED_BY(g_token_mu) = nullptr;

// Adds the node token to each call, read when the call starts, so channels opened
// before registration carry it too.
class NodeTokenPlugin final : public grpc::MetadataCredentialsPlugin {
 public:
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "dtrain-node-token"; }
  grpc::Status GetMetadata(grpc::string_ref /*service_url*/, grpc::string_ref /*method_name*/,
                           const grpc::AuthContext& /*channel_auth_context*/,
                           std::multimap<grpc::string, grpc::string>* metadata) override {
    absl::MutexLock lock(&g_token_mu);
    if (g_token != nullptr && !g_token->empty()) metadata->emplace(auth::kTokenMetadataKey, *g_token);
    return grpc::Status::OK;
  }
};

std::shared_ptr<StaticDataCertificateProvider> Provider(const TransportSecurity& s) {
  std::vector<IdentityKeyCertPair> identity;
  if (!s.cert_pem.empty()) identity.push_back(IdentityKeyCertPair{s.key_pem, s.cert_pem});
  return std::make_shared<StaticDataCertificateProvider>(s.ca_pem, identity);
}

}  // namespace

void SetTransportSecurity(TransportSecurity security) {
  absl::MutexLock lock(&g_mu);
  delete g_security;
  g_security = new TransportSecurity(std::move(security));
}

bool TransportIsTls() { return Current().tls; }

TransportSecurity CurrentTransportSecurity() { return Current(); }

void SetNodeToken(std::string token) {
  absl::MutexLock lock(&g_token_mu);
  delete g_token;
  g_token = new std::string(std::move(token));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TransportSecurity& s) {
  if (!s.tls) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(s));
  options.watch_identity_key_cert_pairs();
  if (s.ca_pem.empty()) {
    // No CA to check clients against (an inference server authenticating by token).
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(s.client_certs == ClientCertPolicy::kRequire
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TransportSecurity& s) {
  if (!s.tls) return grpc::InsecureChannelCredentials();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(s));
  options.watch_root_certs();  // only the job's CA, never the system's trust store
  if (!s.cert_pem.empty()) options.watch_identity_key_cert_pairs();
  // The chain is checked against the CA (verify_server_certs); the host name is not
  // (see the header): the no-op verifier replaces gRPC's default host name check, and
  // no per-call host check either.
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  options.set_check_call_host(false);
  return grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials() { return ServerCredentialsFor(Current()); }

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() {
  const TransportSecurity s = Current();
  if (!s.tls) return ChannelCredentialsFor(s);
  return grpc::CompositeChannelCredentials(ChannelCredentialsFor(s),
                                           grpc::MetadataCredentialsFromPlugin(std::make_unique<NodeTokenPlugin>()));
}

}  // namespace dtrain
