// The gRPC credentials of every dtrain server and channel, from one place, so that
// securing the cluster is a change here rather than at each call site.
//
// A process chooses its transport once, at start (common/tls/tls_flags.h turns
// --tls-cert/--tls-key/--tls-ca or --insecure into a call to SetTransportSecurity),
// before it opens any channel or server. Plaintext until then, as before TLS existed.
//
// Mutual TLS: every node presents a certificate from the job's CA and checks that its
// peer's chains to that CA. The dialled host name is not checked: nodes dial
// addresses chosen at run time (127.0.0.1, a pod IP, whatever --interface gave), so a
// certificate cannot name them in advance. Trust is "signed by this job's CA"; the
// identity a certificate carries (CN/SAN "worker-1.JOB") is checked by the services
// themselves (common/auth/peer_identity.h, docs/security.md).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/status.h"

namespace dtrain {

// What a TLS server asks of its clients.
enum class ClientCertPolicy {
  // The handshake fails without a certificate from the CA: the training cluster.
  kRequire,
  // A certificate is checked when given, but a client may come without one and
  // authenticate per call (a bearer token); the inference server, whose health
  // service must stay open to probes.
  kVerifyIfGiven,
};

struct TransportSecurity {
  bool tls = false;
  std::string ca_pem;    // the job's CA: peers' certificates must chain to it
  std::string cert_pem;  // this process's certificate (chain), PEM
  std::string key_pem;   // its private key, PEM
  ClientCertPolicy client_certs = ClientCertPolicy::kRequire;
};

// Sets the process's transport for every later ServerCredentials/ChannelCredentials.
// Call once from main, before any channel or server exists (later calls replace it,
// which tests use; channels already made keep what they had).
void SetTransportSecurity(TransportSecurity security);

// Whether SetTransportSecurity chose TLS.
bool TransportIsTls();

// What SetTransportSecurity was given (the scheduler derives its token key from its
// private key: common/auth/node_token.h).
TransportSecurity CurrentTransportSecurity();

// The token the scheduler issued this process when it registered (common/auth/
// node_token.h). From then on every call on a TLS channel made by ChannelCredentials()
// carries it, channels made before included; "" stops it. Plaintext channels never
// carry it (it would travel in clear).
void SetNodeToken(std::string token);

// For grpc::ServerBuilder::AddListeningPort.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials();

// For grpc::CreateCustomChannel (see MakeChannel in grpc_util.h). With TLS, its calls
// carry the node token (SetNodeToken).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials();

// Explicit variants, for tests and tools that need credentials other than the
// process's (an attacker with another CA's certificate, a client with none).
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const TransportSecurity& security);
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const TransportSecurity& security);

}  // namespace dtrain
