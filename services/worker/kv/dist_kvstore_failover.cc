// DistKVStore's replica failover (docs/recovery.md): a server whose channel broke
// leaves every chain (MarkDead, FailOver), and a restarted one comes back into the
// chains its partners copied keys to (ApplyJoinNotices). Who takes part is
// ReplicaRouting's state; this file feeds it what the channels say.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/worker/kv/dist_kvstore.h"

namespace dtrain::worker {

void DistKVStore::ApplyJoinNotices() {
  for (size_t s = 0; s < servers_.size(); ++s) {
    for (const ServerChannel::JoinNotice& n : servers_[s]->TakeJoinNotices()) {
      auto it = slice_of_.find(n.key);
      if (it == slice_of_.end() || n.server < 0 || n.server >= static_cast<int>(servers_.size())) continue;
      const size_t i = it->second;
      const std::vector<int>& chain = routing_->chain(i);
      if (std::find(chain.begin(), chain.end(), n.server) == chain.end() || routing_->InChain(i, n.server)) continue;
      if (!routing_->Alive(n.server)) {
        // The restarted process listens elsewhere (a new port): connect to it. It answered
        // its partner's copy a moment ago, so it is up or gone again; a restart after
        // that one sends its own notice. So not the start-up --connect-timeout (2 min),
        // for which the step would stall on a dead address while the keys' partners serve.
        absl::StatusOr<std::unique_ptr<ServerChannel>> client =
            ConnectServer(n.server, n.address, std::min(options_.connect_timeout, kRejoinConnectTimeout));
        if (!client.ok()) {
          DTRAIN_LOG(WARNING) << "server " << n.server << " is back at " << n.address
                              << " but cannot be reached: " << client.status().message();
          continue;
        }
        servers_[n.server] = std::move(*client);
        DTRAIN_LOG(WARNING) << "server " << n.server << " restarted at " << n.address
                            << "; it rejoins the replica chains as its keys are copied to it";
      }
      routing_->Join(i, n.server);
      DTRAIN_LOG(INFO) << "server " << n.server << " is back in the chain of key " << n.key << " from version "
                       << n.version;
    }
  }
}

bool DistKVStore::FailOver(int server, const absl::Status& st) {
  // UNAVAILABLE: the stream broke or the server cannot be reached. Anything else (a
  // fence, a refused push) is an answer, not a death.
  if (options_.replication <= 1 || !absl::IsUnavailable(st)) return false;
  MarkDead(server, st);
  return true;
}

void DistKVStore::MarkDead(int server, const absl::Status& why) {
  const std::string text = why.message().empty() ? absl::StatusCodeToString(why.code()) : std::string(why.message());
  if (!routing_->MarkDead(server, text)) return;
  DTRAIN_LOG(WARNING) << "failover: server " << server << " at " << servers_[server]->address()
                      << " left the replica chains (" << text << "); " << routing_->live_servers() << " of "
                      << servers_.size() << " servers serve the keys";
}
}  // namespace dtrain::worker
