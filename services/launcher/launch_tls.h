// `dtrain launch --tls`: a throwaway CA for one run and a certificate per process,
// handed to each child through DTRAIN_TLS_CERT/KEY/CA.
//
// The CA's private key never touches the disk: it signs the certificates here and is
// dropped with this object, so nothing can issue a certificate for this job later.
// The files live in the launch's private temp directory (0700), removed at exit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/role.h"

namespace dtrain::launcher {

class LaunchTls {
 public:
  // Writes DIR/tls/{ca.crt, scheduler-0.*, server-I.*, worker-I.*, operator.*}. Names
  // "ROLE-RANK.JOB" (each process may act only as its own rank) and "operator.JOB".
  static absl::StatusOr<LaunchTls> Create(const std::string& dir, const std::string& job, int servers, int workers);

  // DTRAIN_TLS_CA, DTRAIN_TLS_CERT, DTRAIN_TLS_KEY for that child.
  std::vector<std::pair<std::string, std::string>> EnvFor(Role role, int rank) const;

  const std::string& dir() const { return dir_; }

 private:
  explicit LaunchTls(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace dtrain::launcher
