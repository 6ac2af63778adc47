// Membership's rules for an elastic job (--elastic MIN:MAX, docs/elastic.md): which
// registrations join the job, and which dead workers are dropped from it. Who is in the
// job and which rank a joiner gets is ElasticRanks' answer (ElasticJob); Membership
// keeps the nodes.
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/scheduler/membership.h"

namespace dtrain::scheduler {

absl::StatusOr<std::optional<int>> Membership::ElasticPickLocked(const Registration& request) {
  const int requested = request.requested_rank;
  if (!all_registered_) {
    // The job starts with ranks 0 .. n-1, as a fixed one does; the rest join later.
    if (requested >= options_.num_workers) {
      return absl::UnavailableError(absl::StrCat("worker rank ", requested, " joins the elastic job (MAX ",
                                                 options_.elastic->max_workers(), ") once it started with ranks 0..",
                                                 options_.num_workers - 1, "; register again then"));
    }
    return std::nullopt;
  }
  // A process that holds an incarnation (its scheduler restarted) keeps its rank.
  if (request.incarnation > 0) return std::nullopt;
  const bool outside = requested >= 0 && requested < options_.elastic->max_workers() &&
                       !options_.elastic->InJob(requested) && !HeldByLiveLocked({Role::kWorker, requested});
  // A rank in the job (a restarted process) or past MAX takes today's way: REJOINING,
  // or refused naming the ranks.
  if (requested >= 0 && !outside) return std::nullopt;
  std::set<int> busy;
  for (const auto& [key, node] : nodes_) {
    if (key.role == Role::kWorker && HeldByLiveLocked(key) && node.info.state != NodeState::kFinished) {
      busy.insert(key.rank);
    }
  }
  absl::StatusOr<int> rank = options_.elastic->Join(requested, busy);
  if (!rank.ok()) return rank.status();
  return *rank;
}

std::vector<NodeRecord> Membership::DroppableWorkers() {
  std::vector<NodeRecord> out;
  if (options_.elastic == nullptr) return out;
  absl::MutexLock lock(&mu_);
  if (!failure_.empty()) return out;
  for (int rank : options_.elastic->Workers()) {
    auto it = nodes_.find({Role::kWorker, rank});
    if (it == nodes_.end()) continue;
    const Node& node = it->second;
    // Within the rejoin timeout a dead worker may still come back (or be replaced).
    if (node.info.state != NodeState::kDead || MayRejoinLocked(it->first, node)) continue;
    if (dropped_.insert({rank, node.info.incarnation}).second) out.push_back(node.info);
  }
  return out;
}

}  // namespace dtrain::scheduler
