#include "services/scheduler/rollback_coordinator.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"

namespace dtrain::scheduler {

RollbackCoordinator::RollbackCoordinator(int num_servers, absl::Duration deadline)
    : num_servers_(num_servers), deadline_(deadline) {}

std::optional<v1::RollbackOrder> RollbackCoordinator::OnServerHeartbeat(int rank, uint64_t incarnation,
                                                                        const v1::SnapshotReport& report,
                                                                        int64_t job_step, absl::Time now) {
  absl::MutexLock lock(&mu_);
  Server& s = servers_[rank];
  if (s.incarnation != 0 && incarnation > s.incarnation) {
    // A new process holds the rank: the old one's shard is gone (no replica holds it).
    lost_.emplace(rank, job_step);
    s = Server();
    if (waiting_since_ == absl::InfiniteFuture()) waiting_since_ = now;
  }
  if (incarnation < s.incarnation) return std::nullopt;  // a fenced stream; the scheduler refuses it anyway
  s.incarnation = incarnation;
  s.listed = report.listed();
  s.steps.assign(report.complete_steps().begin(), report.complete_steps().end());
  s.done = std::max(s.done, report.rollback_done());
  if (report.rollback_done() > generation_) {
    // A server carried out an order this coordinator never gave: it restarted (with
    // the scheduler) in the middle of that rollback. It goes on with the same order:
    // the servers that have not reloaded get it, then the workers that wait for it.
    generation_ = report.rollback_done();
    v1::RollbackOrder order;
    order.set_generation(generation_);
    order.set_step(report.rollback_step());
    order.set_reason(report.rollback_reason());
    order_ = order;
    taken_up_ = generation_;
    rollbacks_ = std::max<int64_t>(rollbacks_, static_cast<int64_t>(generation_));
    DTRAIN_LOG(WARNING) << "taking up rollback " << generation_ << " to step " << order.step() << ", which server "
                        << rank << " carried out before this scheduler started (" << order.reason() << ")";
    if (waiting_since_ == absl::InfiniteFuture()) waiting_since_ = now;
  }
  // A replacement that says its shard is lost, with no order on the way that would
  // bring it back: the loss a scheduler restarted since could not see by incarnation.
  if (report.shard_lost() && !(order_ && s.done < order_->generation())) {
    lost_.emplace(rank, job_step);
    if (waiting_since_ == absl::InfiniteFuture()) waiting_since_ = now;
  }
  MaybeOrder(job_step, now);
  if (order_ && s.done < order_->generation()) return order_;
  return std::nullopt;
}

void RollbackCoordinator::MaybeOrder(int64_t job_step, absl::Time now) {
  if (lost_.empty() || !failure_.empty()) return;
  // Every server must have said what it holds, or S could be one somebody lacks.
  if (static_cast<int>(servers_.size()) < num_servers_) return;
  std::set<int64_t> common;
  bool first = true;
  for (const auto& [rank, s] : servers_) {
    if (!s.listed) return;
    std::set<int64_t> mine(s.steps.begin(), s.steps.end());
    if (first) {
      common = std::move(mine);
      first = false;
      continue;
    }
    std::set<int64_t> both;
    for (int64_t step : common) {
      if (mine.count(step) > 0) both.insert(step);
    }
    common = std::move(both);
  }
  std::vector<std::string> who;
  int64_t from = job_step;
  for (const auto& [rank, step] : lost_) {
    who.push_back(absl::StrCat("server ", rank));
    from = std::max(from, step);
  }
  const std::string lost =
      absl::StrCat(absl::StrJoin(who, ", "), who.size() > 1 ? " lost their shards" : " lost its shard");
  if (common.empty()) {
    std::vector<std::string> held;
    for (const auto& [rank, s] : servers_) {
      held.push_back(absl::StrCat("server ", rank, ": ", s.steps.empty() ? "none" : absl::StrJoin(s.steps, ", ")));
    }
    failure_ = absl::StrCat(lost, " and the servers have no snapshot step in common (", absl::StrJoin(held, "; "),
                            "): cannot roll back (--snapshot-every)");
    DTRAIN_LOG(ERROR) << failure_;
    return;
  }
  const int64_t step = *common.rbegin();
  v1::RollbackOrder order;
  order.set_generation(++generation_);
  order.set_step(step);
  order.set_reason(absl::StrCat("rolled back from step ", from, " to step ", step, ": ", lost));
  DTRAIN_LOG(WARNING) << order.reason() << " (rollback " << order.generation() << "; servers reload, then workers)";
  order_ = order;
  ++rollbacks_;
  lost_.clear();
  waiting_since_ = now;
}

bool RollbackCoordinator::TakenUp(uint64_t generation) const {
  absl::MutexLock lock(&mu_);
  return generation != 0 && generation == taken_up_;
}

std::optional<v1::RollbackOrder> RollbackCoordinator::ForWorkers() const {
  absl::MutexLock lock(&mu_);
  if (!order_ || static_cast<int>(servers_.size()) < num_servers_) return std::nullopt;
  for (const auto& [rank, s] : servers_) {
    if (s.done < order_->generation()) return std::nullopt;
  }
  return order_;
}

bool RollbackCoordinator::Enabled() const {
  absl::MutexLock lock(&mu_);
  if (num_servers_ == 0 || static_cast<int>(servers_.size()) < num_servers_) return false;
  for (const auto& [rank, s] : servers_) {
    if (!s.listed && s.incarnation <= 1) return false;  // a replacement still listing counts: it was enabled
  }
  return true;
}

void RollbackCoordinator::Check(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (!failure_.empty() || waiting_since_ == absl::InfiniteFuture()) return;
  std::vector<std::string> missing;
  for (int r = 0; r < num_servers_; ++r) {
    auto it = servers_.find(r);
    if (it == servers_.end() || !it->second.listed) {
      missing.push_back(absl::StrCat("server ", r, " (snapshots not listed)"));
    } else if (order_ && it->second.done < order_->generation()) {
      missing.push_back(absl::StrCat("server ", r, " (not reloaded)"));
    }
  }
  if (missing.empty() && lost_.empty()) {
    waiting_since_ = absl::InfiniteFuture();  // done: every server reloaded
    return;
  }
  if (now - waiting_since_ <= deadline_) return;
  failure_ = absl::StrCat("rollback to a snapshot did not complete within ", absl::FormatDuration(deadline_),
                          ": waiting for ", absl::StrJoin(missing, ", "));
  DTRAIN_LOG(ERROR) << failure_;
}

std::string RollbackCoordinator::Failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

int64_t RollbackCoordinator::rollbacks() const {
  absl::MutexLock lock(&mu_);
  return rollbacks_;
}

std::vector<int64_t> RollbackCoordinator::SnapshotSteps(int rank) const {
  absl::MutexLock lock(&mu_);
  auto it = servers_.find(rank);
  return it == servers_.end() ? std::vector<int64_t>() : it->second.steps;
}

std::optional<int64_t> RollbackCoordinator::CommonStep() const {
  absl::MutexLock lock(&mu_);
  if (num_servers_ == 0 || static_cast<int>(servers_.size()) < num_servers_) return std::nullopt;
  std::set<int64_t> common;
  for (const auto& [rank, s] : servers_) {
    if (!s.listed) return std::nullopt;
    std::set<int64_t> mine(s.steps.begin(), s.steps.end());
    if (rank == servers_.begin()->first) {
      common = std::move(mine);
      continue;
    }
    std::set<int64_t> both;
    std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(), std::inserter(both, both.end()));
    common = std::move(both);
  }
  if (common.empty()) return std::nullopt;
  return *common.rbegin();
}

uint64_t RollbackCoordinator::Order(int64_t step, const std::string& reason, absl::Time now) {
  absl::MutexLock lock(&mu_);
  v1::RollbackOrder order;
  order.set_generation(++generation_);
  order.set_step(step);
  order.set_reason(reason);
  DTRAIN_LOG(WARNING) << reason << " (rollback " << order.generation() << "; servers reload, then workers)";
  order_ = order;
  ++rollbacks_;
  waiting_since_ = now;
  return order.generation();
}

std::string RollbackCoordinator::last_rollback() const {
  absl::MutexLock lock(&mu_);
  return order_ ? order_->reason() : "";
}

}  // namespace dtrain::scheduler
