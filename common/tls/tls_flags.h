// --tls-cert, --tls-key, --tls-ca and --insecure, the same in every dtrain program
// (env DTRAIN_TLS_CERT, DTRAIN_TLS_KEY, DTRAIN_TLS_CA, DTRAIN_INSECURE), so the
// scheduler, servers, workers, the inference server and the client tools agree, and
// `dtrain launch --tls` only has to set the environment of its children.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/credentials.h"
#include "common/flags.h"

namespace dtrain {

struct TlsFlags {
  std::string cert;       // this process's certificate (PEM; a chain may follow it)
  std::string key;        // its private key (PEM, unencrypted)
  std::string ca;         // the job's CA: peers must present a certificate it signed
  bool insecure = false;  // plaintext, said explicitly
};

void AddTlsFlags(FlagSet& flags, TlsFlags* out);

// Who is configuring TLS: what each must have.
enum class TlsUse {
  kClusterNode,      // scheduler, server, worker: all three files (mutual TLS)
  kInferenceServer,  // --tls-cert and --tls-key; --tls-ca adds client-certificate authentication
  kClient,           // dtrain predict / status: --tls-ca; --tls-cert and --tls-key to present a certificate
};

// Reads and checks the files (common/tls/pem_check.h) into the transport to use; a
// plaintext one when no TLS flag is set or --insecure. INVALID_ARGUMENT naming the
// flag: a file missing for `use`, cert without key, --insecure with a TLS flag.
absl::StatusOr<TransportSecurity> LoadTransportSecurity(const TlsFlags& flags, TlsUse use);

// main's one call: LoadTransportSecurity, then SetTransportSecurity. Plaintext and
// `listen_host` (where this process serves gRPC; "" for none) beyond loopback: logs
// one warning that anyone who reaches the port can join the job.
absl::Status ApplyTlsFlags(const TlsFlags& flags, TlsUse use, const std::string& listen_host);

// 127.0.0.0/8, ::1, "localhost" (with or without brackets).
bool IsLoopbackHost(const std::string& host);

}  // namespace dtrain
