#include "common/kv/replica_chain.h"

#include "absl/strings/str_cat.h"

namespace dtrain::kv {

absl::Status CheckReplication(int replication, int num_servers) {
  if (replication < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--replication must be at least 1, got ", replication));
  }
  const int most = num_servers > 0 ? num_servers : 1;
  if (replication > most) {
    return absl::InvalidArgumentError(absl::StrCat("--replication ", replication,
                                                   " needs at least as many servers, but the job has ", num_servers,
                                                   " (each replica of a key range lives on a different server)"));
  }
  return absl::OkStatus();
}

std::vector<int> ReplicaChain(int home, int replication, int num_servers) {
  std::vector<int> chain;
  chain.reserve(replication);
  for (int i = 0; i < replication; ++i) chain.push_back((home + i) % num_servers);
  return chain;
}

}  // namespace dtrain::kv
