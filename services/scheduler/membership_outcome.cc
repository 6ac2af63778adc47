// Membership's outcome and its texts: whether the job is over (and why), and the
// sentences that name who is missing or how a node stands, for errors and logs.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/scheduler/membership.h"

namespace dtrain::scheduler {
namespace {

bool Gone(NodeState s) { return s == NodeState::kDead || s == NodeState::kFinished; }

}  // namespace

std::string Membership::FencedText(const NodeKey& key, uint64_t stale, const Node& holder) const {
  const RankTable& ranks = key.role == Role::kWorker ? workers_ : servers_;
  return ranks.FencedText(key.rank, stale, OccupantOf(holder));
}

std::string Membership::FailureLocked() const {
  if (!failure_.empty() || !all_registered_) return failure_;
  // An elastic job's dead workers are dropped (DroppableWorkers); it fails only when
  // too few are left for too long (ElasticJob), through FailJob.
  if (options_.elastic != nullptr) return "";
  // With a rejoin timeout a dead worker may come back; ExpireRejoinWaits fails the job.
  if (liveness_.RejoinAllowed()) return "";
  // Every worker is gone and one of them died: nobody is left to finish the job.
  std::string died;
  for (int r = 0; r < options_.num_workers; ++r) {
    auto it = nodes_.find({Role::kWorker, r});
    if (it == nodes_.end() || !Gone(it->second.info.state)) return "";
    if (died.empty() && it->second.info.state == NodeState::kDead) {
      died = absl::StrCat(NodeName(it->first), " died (", it->second.live.death_reason, ") and no worker is left");
    }
  }
  return died;
}

bool Membership::JobOver(std::string* reason) const {
  absl::MutexLock lock(&mu_);
  if (const std::string failure = FailureLocked(); !failure.empty()) {
    if (reason != nullptr) *reason = failure;
    return true;
  }
  if (!all_registered_) return false;
  // An elastic job's workers are its latest generation's: a leaver's exit or a dropped
  // worker's death does not count, a joiner's finish does.
  std::vector<int> workers;
  if (options_.elastic != nullptr) {
    workers = options_.elastic->Workers();
  } else {
    for (int r = 0; r < options_.num_workers; ++r) workers.push_back(r);
  }
  for (int r : workers) {
    auto it = nodes_.find({Role::kWorker, r});
    if (it == nodes_.end() || it->second.info.state != NodeState::kFinished) return false;
  }
  if (reason != nullptr) *reason = absl::StrCat("all ", workers.size(), " workers finished");
  return true;
}

void Membership::FailJob(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (!failure_.empty()) return;
  failure_ = why;
  changed_.SignalAll();
}

std::string Membership::Failure() const {
  absl::MutexLock lock(&mu_);
  return FailureLocked();
}

bool Membership::AllGone() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, node] : nodes_) {
    if (!Gone(node.info.state)) return false;
  }
  return true;
}

std::string Membership::RegistrationTextLocked() const {
  const int workers = CountRegistered(Role::kWorker);
  const int servers = CountRegistered(Role::kServer);
  std::string text =
      absl::StrFormat("registration: %d of %d workers, %d of %d servers after %.0f s", workers, options_.num_workers,
                      servers, options_.num_servers, absl::ToDoubleSeconds(Now() - start_));
  std::vector<std::string> missing;
  for (Role role : {Role::kWorker, Role::kServer}) {
    std::vector<int> ranks;
    for (int r = 0; r < Expected(role); ++r) {
      if (nodes_.count({role, r}) == 0) ranks.push_back(r);
    }
    if (ranks.empty()) continue;
    missing.push_back(
        absl::StrCat(RoleName(role), ranks.size() == 1 ? " rank " : " ranks ", absl::StrJoin(ranks, ", ")));
  }
  if (!missing.empty()) absl::StrAppend(&text, "; missing ", absl::StrJoin(missing, "; "));
  return text;
}

std::string Membership::RegistrationText() const {
  absl::MutexLock lock(&mu_);
  return RegistrationTextLocked();
}

std::string Membership::Describe(const NodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return "not registered";
  const Node& node = it->second;
  switch (node.info.state) {
    case NodeState::kDead:
      return absl::StrCat("DEAD for ", SecondsText(liveness_.SinceDeath(node.live)), " (", node.live.death_reason, ")");
    case NodeState::kFinished:
      return node.assumed_finished ? "did not register again after the scheduler restarted: assumed to have left"
                                   : "already left the job";
    case NodeState::kRegistered:
      return absl::StrCat("registered ", SecondsText(liveness_.SinceHeard(node.live)), " ago, no heartbeat yet");
    case NodeState::kRejoining:
      return absl::StrCat("rejoining (incarnation ", node.info.incarnation, "), last heard ",
                          SecondsText(liveness_.SinceHeard(node.live)), " ago");
    default:
      return absl::StrCat("last heard ", SecondsText(liveness_.SinceHeard(node.live)), " ago, at step ",
                          node.info.last_step);
  }
}

}  // namespace dtrain::scheduler
