#include "common/tls/tls_flags.h"

#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/log.h"
#include "common/tls/pem_check.h"

namespace dtrain {
namespace {

// PEM files are a few KB; a cap keeps a wrong path (a device, a huge file) harmless.
constexpr size_t kMaxPemBytes = 1 << 20;

absl::Status ReadPem(const std::string& flag, const std::string& path, std::string* out) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> text = ReadFileLimited(path, kMaxPemBytes);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", text.status().message()));
  *out = *std::move(text);
  return absl::OkStatus();
}

}  // namespace

void AddTlsFlags(FlagSet& flags, TlsFlags* out) {
  flags.AddString("tls-cert", &out->cert,
                  "this process's TLS certificate (PEM), signed by the job's CA; with --tls-key and --tls-ca: "
                  "mutual TLS on every connection (dtrain certs makes them)",
                  {"DTRAIN_TLS_CERT"});
  flags.AddString("tls-key", &out->key, "the private key of --tls-cert (PEM)", {"DTRAIN_TLS_KEY"});
  flags.AddString("tls-ca", &out->ca, "the job's CA certificate (PEM): peers must present a certificate it signed",
                  {"DTRAIN_TLS_CA"});
  flags.AddBool("insecure", &out->insecure,
                "plaintext gRPC (no TLS flags given means the same); a warning is logged when it listens beyond "
                "loopback",
                {"DTRAIN_INSECURE"});
}

absl::StatusOr<TransportSecurity> LoadTransportSecurity(const TlsFlags& f, TlsUse use) {
  const bool any = !f.cert.empty() || !f.key.empty() || !f.ca.empty();
  if (f.insecure && any) {
    return absl::InvalidArgumentError(
        "--insecure with --tls-cert/--tls-key/--tls-ca (or DTRAIN_TLS_*): choose plaintext or TLS");
  }
  if (!any) return TransportSecurity{};
  if (f.cert.empty() != f.key.empty()) {
    return absl::InvalidArgumentError(f.cert.empty() ? "--tls-key needs --tls-cert (the certificate it belongs to)"
                                                     : "--tls-cert needs --tls-key (its private key)");
  }
  if (use != TlsUse::kClient && f.cert.empty()) {
    return absl::InvalidArgumentError("TLS needs --tls-cert and --tls-key (this process's certificate and key)");
  }
  if (use != TlsUse::kInferenceServer && f.ca.empty()) {
    return absl::InvalidArgumentError("TLS needs --tls-ca (the job's CA, to check the peer's certificate)");
  }
  tls::PemFiles files{f.cert, f.key, f.ca, "", "", ""};
  for (auto [flag, path, out] :
       {std::tuple{"tls-cert", &f.cert, &files.cert_pem}, std::tuple{"tls-key", &f.key, &files.key_pem},
        std::tuple{"tls-ca", &f.ca, &files.ca_pem}}) {
    if (absl::Status s = ReadPem(flag, *path, out); !s.ok()) return s;
  }
  if (absl::Status s = tls::CheckPemFiles(files); !s.ok()) return s;
  TransportSecurity t;
  t.tls = true;
  t.ca_pem = std::move(files.ca_pem);
  t.cert_pem = std::move(files.cert_pem);
  t.key_pem = std::move(files.key_pem);
  t.client_certs = use == TlsUse::kInferenceServer ? ClientCertPolicy::kVerifyIfGiven : ClientCertPolicy::kRequire;
  return t;
}

bool IsLoopbackHost(const std::string& host) {
  std::string h = host;
  if (absl::StartsWith(h, "[") && absl::EndsWith(h, "]")) h = h.substr(1, h.size() - 2);
  return h == "localhost" || h == "::1" || absl::StartsWith(h, "127.");
}

absl::Status ApplyTlsFlags(const TlsFlags& flags, TlsUse use, const std::string& listen_host) {
  absl::StatusOr<TransportSecurity> t = LoadTransportSecurity(flags, use);
  if (!t.ok()) return t.status();
  if (!t->tls && !listen_host.empty() && !IsLoopbackHost(listen_host)) {
    DTRAIN_LOG(WARNING) << "plaintext gRPC on " << listen_host
                        << " (beyond loopback): anyone who reaches this port can join or read the job; pass "
                           "--tls-cert, --tls-key and --tls-ca (docs/security.md)";
  }
  SetTransportSecurity(*std::move(t));
  return absl::OkStatus();
}

}  // namespace dtrain
