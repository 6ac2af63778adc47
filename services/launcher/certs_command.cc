// `dtrain certs`: a CA and a certificate per process for a hand-launched (or
// Kubernetes) job with mutual TLS. `dtrain launch --tls` needs none of this.
//
//   dtrain certs --dir certs --job mnist -n 2 -s 1 --names infer,client
//   # certs/ca.crt, certs/ca.key (keep it; 0600), certs/scheduler-0.{crt,key},
//   # certs/server-0.*, certs/worker-{0,1}.*, certs/infer.*, certs/client.*
//   DTRAIN_TLS_CA=certs/ca.crt DTRAIN_TLS_CERT=certs/worker-1.crt DTRAIN_TLS_KEY=certs/worker-1.key dtrain run ...
//
// Run again on the same --dir, it keeps the CA and issues the certificates asked for
// (a new worker, a renewal); a certificate from another CA would be refused by the job.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/flags.h"
#include "common/tls/cert_authority.h"
#include "services/launcher/commands.h"

namespace dtrain::launcher {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

struct CertsFlags {
  std::string dir;
  std::string job = "dtrain";
  int64_t num_workers = 0;
  int64_t num_servers = 0;
  std::string names;  // comma list of further leaves (infer, client, ...)
  std::string sans;   // comma list of host names / IPs added to every leaf
  int64_t days = 30;
};

std::vector<std::string> CommaList(const std::string& text) {
  return absl::StrSplit(text, ',', absl::SkipWhitespace());
}

absl::Status Parse(const std::vector<std::string>& args, CertsFlags* f, bool* help) {
  FlagSet flags("dtrain certs",
                "Makes a CA and a certificate per process for a job with mutual TLS (--tls-cert, --tls-key,\n"
                "--tls-ca on every process). Usage: dtrain certs --dir DIR [--job NAME] -n W -s S [--names a,b]");
  flags.AddString("dir", &f->dir, "where to write ca.crt, ca.key and NAME.crt/NAME.key (created 0700)");
  flags.AddString("job", &f->job, "the job's name, in every certificate's name (worker-1.JOB)", {"DTRAIN_JOB_ID"});
  flags.AddInt("num-workers", &f->num_workers, "certificates worker-0 .. worker-(W-1) (-n)");
  flags.AddInt("num-servers", &f->num_servers, "certificates server-0 .. server-(S-1) (-s); and scheduler-0");
  flags.AddString("names", &f->names, "further certificates by name, comma-separated (e.g. infer,client)");
  flags.AddString("san", &f->sans,
                  "host names or IP addresses added to every certificate, comma-separated, besides localhost and "
                  "127.0.0.1 (for tools that check them; dtrain checks only the CA)");
  flags.AddInt("days", &f->days, "validity of the CA and the certificates");
  std::vector<std::string> expanded;
  for (const std::string& a : args) {
    expanded.push_back(a == "-n" ? "--num-workers" : a == "-s" ? "--num-servers" : a);
  }
  absl::Status s = flags.Parse(expanded);
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok() || *help) return s;
  if (f->dir.empty()) return absl::InvalidArgumentError("--dir is required");
  if (f->num_workers < 0 || f->num_servers < 0) return absl::InvalidArgumentError("-n and -s must not be negative");
  if (f->days < 1 || f->days > 3650) return absl::InvalidArgumentError("--days must be in 1..3650");
  if (f->job.empty() || f->job.find_first_of("/ ,") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--job \"", f->job, "\": want a name without '/', ' ' or ','"));
  }
  for (const std::string& n : CommaList(f->names)) {
    if (n.find_first_of("/. ") != std::string::npos || n == "ca") {
      return absl::InvalidArgumentError(absl::StrCat("--names: \"", n, "\" cannot be a certificate's file name"));
    }
  }
  return absl::OkStatus();
}

// The CA in `dir`, or a new one written there.
absl::StatusOr<tls::CertAuthority> OpenOrCreateCa(const CertsFlags& f, absl::Duration validity, bool* created) {
  const std::string key = f.dir + "/ca.key";
  const std::string crt = f.dir + "/ca.crt";
  *created = false;
  absl::StatusOr<std::string> key_pem = ReadFileLimited(key, kMaxPemBytes);
  if (key_pem.ok()) {
    absl::StatusOr<std::string> crt_pem = ReadFileLimited(crt, kMaxPemBytes);
    if (!crt_pem.ok()) return crt_pem.status();
    absl::StatusOr<tls::CertAuthority> ca = tls::CertAuthority::Load(*key_pem, *crt_pem);
    if (!ca.ok()) return absl::InvalidArgumentError(absl::StrCat(f.dir, ": ", ca.status().message()));
    return ca;
  }
  if (!absl::IsNotFound(key_pem.status())) return key_pem.status();
  absl::StatusOr<tls::CertAuthority> ca = tls::CertAuthority::Create(f.job, validity);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::pair<std::string, std::string>> written = tls::WriteKeyAndCert(f.dir, "ca", ca->ca());
  if (!written.ok()) return written.status();
  *created = true;
  return ca;
}

absl::Status MakeCerts(const CertsFlags& f) {
  if (::mkdir(f.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot create ", f.dir));
  }
  const absl::Duration validity = absl::Hours(24) * f.days;
  bool created = false;
  absl::StatusOr<tls::CertAuthority> ca = OpenOrCreateCa(f, validity, &created);
  if (!ca.ok()) return ca.status();
  std::printf("%s %s/ca.crt (and ca.key, 0600: keep it private)\n", created ? "made" : "using", f.dir.c_str());
  std::vector<std::pair<std::string, std::string>> leaves;  // file stem, certificate name
  if (f.num_workers > 0 || f.num_servers > 0)
    leaves.emplace_back("scheduler-0", tls::LeafName(Role::kScheduler, 0, f.job));
  for (int i = 0; i < f.num_servers; ++i)
    leaves.emplace_back(absl::StrCat("server-", i), tls::LeafName(Role::kServer, i, f.job));
  for (int i = 0; i < f.num_workers; ++i)
    leaves.emplace_back(absl::StrCat("worker-", i), tls::LeafName(Role::kWorker, i, f.job));
  for (const std::string& n : CommaList(f.names)) leaves.emplace_back(n, absl::StrCat(n, ".", f.job));
  // Loopback names always: a job tried on one machine then dials names its certificates
  // carry, and gRPC's server does not log a name mismatch per connection.
  std::vector<std::string> sans = {"localhost", "127.0.0.1"};
  for (const std::string& san : CommaList(f.sans)) sans.push_back(san);
  for (const auto& [stem, name] : leaves) {
    absl::StatusOr<tls::KeyAndCert> kc = ca->Issue(name, sans, validity);
    if (!kc.ok()) return kc.status();
    absl::StatusOr<std::pair<std::string, std::string>> paths = tls::WriteKeyAndCert(f.dir, stem, *kc);
    if (!paths.ok()) return paths.status();
    std::printf("made %s (%s) and its key %s\n", paths->second.c_str(), name.c_str(), paths->first.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int CertsCommand(const std::vector<std::string>& args) {
  CertsFlags f;
  bool help = false;
  if (absl::Status s = Parse(args, &f, &help); !s.ok() || help) {
    if (!s.ok()) std::fprintf(stderr, "dtrain certs: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 2;
  }
  if (absl::Status s = MakeCerts(f); !s.ok()) {
    std::fprintf(stderr, "dtrain certs: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace dtrain::launcher
