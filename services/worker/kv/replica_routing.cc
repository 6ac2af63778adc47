#include "services/worker/kv/replica_routing.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kv/replica_chain.h"

namespace dtrain::worker {

ReplicaRouting::ReplicaRouting(const std::vector<int>& homes, int replication, int num_servers)
    : replication_(replication), dead_why_(num_servers > 0 ? num_servers : 0) {
  for (int home : homes) {
    chains_.push_back(kv::ReplicaChain(home, replication, num_servers));
    in_chain_.emplace_back(chains_.back().size(), true);
  }
}

bool ReplicaRouting::InChain(size_t i, int server) const {
  if (server < 0 || server >= static_cast<int>(dead_why_.size()) || !Alive(server)) return false;
  for (size_t p = 0; p < chains_[i].size(); ++p) {
    if (chains_[i][p] == server) return in_chain_[i][p];
  }
  return false;
}

int ReplicaRouting::Head(size_t i) const {
  return kv::FirstAlive(chains_[i], [this, i](int r) { return InChain(i, r); });
}

bool ReplicaRouting::MarkDead(int server, const std::string& why) {
  if (!Alive(server)) return false;
  dead_why_[server] = why.empty() ? "dead" : why;
  for (size_t i = 0; i < chains_.size(); ++i) LeaveChain(i, server);
  return true;
}

void ReplicaRouting::LeaveChain(size_t i, int server) {
  for (size_t p = 0; p < chains_[i].size(); ++p) {
    if (chains_[i][p] == server) in_chain_[i][p] = false;
  }
}

bool ReplicaRouting::Join(size_t i, int server) {
  bool member = false;
  for (size_t p = 0; p < chains_[i].size(); ++p) {
    if (chains_[i][p] != server) continue;
    member = true;
    if (Alive(server) && in_chain_[i][p]) return false;
    in_chain_[i][p] = true;
  }
  if (!member) return false;
  dead_why_[server].clear();
  return true;
}

int ReplicaRouting::live_servers() const {
  int n = 0;
  for (const std::string& w : dead_why_) n += w.empty() ? 1 : 0;
  return n;
}

absl::Status ReplicaRouting::NoReplicaLeft(size_t i, uint64_t key) const {
  std::vector<std::string> gone;
  for (int m : chains_[i]) {
    gone.push_back(absl::StrCat("server ", m, " (", Alive(m) ? "restarted, key not copied yet" : dead_why_[m], ")"));
  }
  return absl::FailedPreconditionError(absl::StrCat("key ", key, ": every replica is gone: ", absl::StrJoin(gone, ", "),
                                                    " (--replication ", replication_, ")"));
}

}  // namespace dtrain::worker
