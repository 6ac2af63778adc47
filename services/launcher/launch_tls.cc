#include "services/launcher/launch_tls.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/tls/cert_authority.h"

namespace dtrain::launcher {
namespace {

// Long enough for any run; a throwaway CA that outlived its job would be harmless anyway
// (its key is gone).
constexpr absl::Duration kValidity = absl::Hours(24 * 30);

}  // namespace

absl::StatusOr<LaunchTls> LaunchTls::Create(const std::string& parent, const std::string& job, int servers,
                                            int workers) {
  const std::string dir = parent + "/tls";
  if (::mkdir(dir.c_str(), 0700) != 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot create ", dir));
  }
  absl::StatusOr<tls::CertAuthority> ca = tls::CertAuthority::Create(job, kValidity);
  if (!ca.ok()) return ca.status();
  if (absl::Status s = WriteFileAtomically(dir + "/ca.crt", ca->ca().cert_pem); !s.ok()) return s;
  auto issue = [&](Role role, int rank) -> absl::Status {
    absl::StatusOr<tls::KeyAndCert> kc =
        ca->Issue(tls::LeafName(role, rank, job), {"localhost", "127.0.0.1"}, kValidity);
    if (!kc.ok()) return kc.status();
    return tls::WriteKeyAndCert(dir, absl::StrCat(RoleName(role), "-", rank), *kc).status();
  };
  if (absl::Status s = issue(Role::kScheduler, 0); !s.ok()) return s;
  for (int i = 0; i < servers; ++i) {
    if (absl::Status s = issue(Role::kServer, i); !s.ok()) return s;
  }
  for (int i = 0; i < workers; ++i) {
    if (absl::Status s = issue(Role::kWorker, i); !s.ok()) return s;
  }
  // For `dtrain status` (and dtrain-server GetState) while the run lasts: an operator
  // reads the job's state but can never join it (common/auth/peer_identity.h).
  absl::StatusOr<tls::KeyAndCert> op = ca->Issue(absl::StrCat("operator.", job), {"localhost", "127.0.0.1"}, kValidity);
  if (!op.ok()) return op.status();
  if (absl::Status s = tls::WriteKeyAndCert(dir, "operator", *op).status(); !s.ok()) return s;
  return LaunchTls(dir);
}

std::vector<std::pair<std::string, std::string>> LaunchTls::EnvFor(Role role, int rank) const {
  const std::string stem = absl::StrCat(dir_, "/", RoleName(role), "-", rank);
  return {{"DTRAIN_TLS_CA", dir_ + "/ca.crt"},
          {"DTRAIN_TLS_CERT", stem + ".crt"},
          {"DTRAIN_TLS_KEY", stem + ".key"},
          {"DTRAIN_INSECURE", "0"}};
}

}  // namespace dtrain::launcher
