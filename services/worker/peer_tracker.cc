#include "services/worker/peer_tracker.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace dtrain::worker {

void PeerTracker::OnDead(int rank, absl::Time since, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  dead_.emplace(rank, DeadPeer{rank, since, reason});  // keeps an earlier report
}

void PeerTracker::OnRejoined(int rank) {
  absl::MutexLock lock(&mu_);
  dead_.erase(rank);
}

std::vector<DeadPeer> PeerTracker::DeadPeers() const {
  absl::MutexLock lock(&mu_);
  std::vector<DeadPeer> out;
  for (const auto& [rank, peer] : dead_) out.push_back(peer);
  return out;
}

std::string PeerTracker::DeathText(const DeadPeer& peer, absl::Duration rejoin_timeout) {
  const std::string why = peer.reason.empty() ? "" : absl::StrCat(" (", peer.reason, ")");
  if (rejoin_timeout <= absl::ZeroDuration()) {
    return absl::StrCat("worker ", peer.rank, " died", why, " and --rejoin-timeout is 0");
  }
  return absl::StrCat("worker ", peer.rank, " died", why, " and did not rejoin within ",
                      absl::FormatDuration(rejoin_timeout), " (--rejoin-timeout)");
}

absl::StatusOr<bool> PeerTracker::ExtendWait(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (dead_.empty()) return false;
  // The longest dead decides: once it is past the timeout, the job cannot finish.
  const DeadPeer* oldest = nullptr;
  for (const auto& [rank, peer] : dead_) {
    if (oldest == nullptr || peer.since < oldest->since) oldest = &peer;
  }
  if (now - oldest->since >= rejoin_timeout_) return absl::AbortedError(DeathText(*oldest, rejoin_timeout_));
  if (now - last_log_ >= log_every_) {
    last_log_ = now;
    for (const auto& [rank, peer] : dead_) {
      DTRAIN_LOG(WARNING) << "waiting for worker " << rank << " to rejoin (dead for "
                          << absl::ToInt64Seconds(now - peer.since) << " s"
                          << (peer.reason.empty() ? "" : ", " + peer.reason) << "; --rejoin-timeout "
                          << absl::FormatDuration(rejoin_timeout_) << ")";
    }
  }
  return true;
}

}  // namespace dtrain::worker
