#include "services/scheduler/elastic_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace dtrain::scheduler {
namespace {

using elastic::Generation;
using elastic::MembershipSchedule;
using elastic::RankSetText;

bool Has(const std::vector<int>& ranks, int r) { return std::binary_search(ranks.begin(), ranks.end(), r); }

// Ranks of `a` not in `b` (both ascending).
std::vector<int> Minus(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// "worker 2 joined" / "workers 2, 3 left".
std::string Who(const std::vector<int>& ranks, const char* what) {
  return absl::StrCat(ranks.size() == 1 ? "worker " : "workers ", absl::StrJoin(ranks, ", "), " ", what);
}

}  // namespace

std::string ChangeLine(const Generation& before, const Generation& after) {
  std::vector<std::string> parts;
  if (const std::vector<int> in = Minus(after.ranks, before.ranks); !in.empty()) parts.push_back(Who(in, "joined"));
  if (const std::vector<int> out = Minus(before.ranks, after.ranks); !out.empty()) parts.push_back(Who(out, "left"));
  // A replay's generation after a zero-length one it leaves out may keep the workers.
  if (parts.empty()) parts.push_back("the same workers went on");
  return absl::StrCat(absl::StrJoin(parts, " and "), " at step ", after.from_step, ": ", after.ranks.size(),
                      after.ranks.size() == 1 ? " worker" : " workers", " from now");
}

absl::StatusOr<MembershipSchedule> WithoutZeroLength(const MembershipSchedule& schedule) {
  std::vector<Generation> kept;
  for (int g = 0; g < static_cast<int>(schedule.generations().size()); ++g) {
    if (!schedule.ZeroLength(g)) kept.push_back(schedule.generations()[g]);
  }
  return MembershipSchedule::Create(schedule.min_workers(), schedule.max_workers(), std::move(kept));
}

absl::StatusOr<ElasticCoordinator> ElasticCoordinator::Create(MembershipSchedule schedule,
                                                              std::optional<MembershipSchedule> replay) {
  if (replay) {
    // A generation of the recording that merged no step (a joiner that died before its
    // first) changed nothing a step computes: the replay commits the ones that did,
    // with no worker started for it.
    DTRAIN_ASSIGN_OR_RETURN(replay, WithoutZeroLength(*replay));
    if (replay->min_workers() != schedule.min_workers() || replay->max_workers() != schedule.max_workers()) {
      return absl::InvalidArgumentError(absl::StrCat("the replayed schedule's bounds ", replay->min_workers(), ":",
                                                     replay->max_workers(), " are not the job's ",
                                                     schedule.min_workers(), ":", schedule.max_workers()));
    }
    const auto& mine = schedule.generations();
    for (size_t i = 0; i < mine.size(); ++i) {
      if (i >= replay->generations().size() || !(replay->generations()[i] == mine[i])) {
        return absl::InvalidArgumentError(absl::StrCat("the replayed schedule differs from the job's at generation ", i,
                                                       ": the job has ", schedule.Describe(static_cast<int>(i))));
      }
    }
  }
  return ElasticCoordinator(std::move(schedule), std::move(replay));
}

absl::StatusOr<int> ElasticCoordinator::Join(const std::set<int>& busy) {
  const std::vector<int>& now = schedule_.latest().ranks;
  const int next_index = static_cast<int>(schedule_.generations().size());
  if (replay_) {
    // The ranks the recording lets join, generation by generation from the next one.
    const auto& recorded = replay_->generations();
    for (int g = std::max(next_index, 1); g < static_cast<int>(recorded.size()); ++g) {
      for (int r : Minus(recorded[g].ranks, recorded[g - 1].ranks)) {
        if (!Has(now, r) && busy.count(r) == 0 && joined_.insert(r).second) return r;
      }
    }
  } else {
    for (int r = 0; r < schedule_.max_workers(); ++r) {
      // A leaver's rank is free only once it has left.
      if (!Has(now, r) && joined_.count(r) == 0 && busy.count(r) == 0) {
        joined_.insert(r);
        return r;
      }
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no worker rank is free for a joiner (--elastic ", schedule_.min_workers(), ":", schedule_.max_workers(),
      ", workers ", RankSetText(now), ", joining ", RankSetText({joined_.begin(), joined_.end()}), ")"));
}

absl::Status ElasticCoordinator::Leave(int rank) {
  if (!Has(schedule_.latest().ranks, rank)) {
    return absl::NotFoundError(absl::StrCat("worker ", rank, " is not in the job (",
                                            schedule_.Describe(static_cast<int>(schedule_.generations().size()) - 1),
                                            ")"));
  }
  left_.insert(rank);
  return absl::OkStatus();
}

absl::Status ElasticCoordinator::JoinAs(int rank) {
  if (rank < 0 || rank >= schedule_.max_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", rank, " is outside the job's ranks 0..",
                                                   schedule_.max_workers() - 1, " (--elastic ", schedule_.min_workers(),
                                                   ":", schedule_.max_workers(), ")"));
  }
  if (Holds(rank)) {
    return absl::AlreadyExistsError(
        absl::StrCat("worker rank ", rank, " is in the job already (",
                     schedule_.Describe(static_cast<int>(schedule_.generations().size()) - 1),
                     joined_.count(rank) > 0 ? ", joining" : "", ")"));
  }
  if (replay_) {
    // The recording decides who joins when: the rank must join in a generation to come.
    const auto& recorded = replay_->generations();
    bool recorded_join = false;
    for (int g = std::max<int>(schedule_.generations().size(), 1); g < static_cast<int>(recorded.size()); ++g) {
      recorded_join = recorded_join || (Has(recorded[g].ranks, rank) && !Has(recorded[g - 1].ranks, rank));
    }
    if (!recorded_join) {
      return absl::FailedPreconditionError(
          absl::StrCat("the replayed schedule has no later generation that worker ", rank, " joins"));
    }
  }
  joined_.insert(rank);
  return absl::OkStatus();
}

absl::Status ElasticCoordinator::WithdrawJoin(int rank) {
  if (joined_.count(rank) == 0) {
    return absl::NotFoundError(absl::StrCat("worker ", rank, " is not a joiner waiting for its commit"));
  }
  if (committing_ && Has(committing_->ranks, rank)) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", rank, "'s join is being committed from step ",
                                                      committing_->from_step, " on some servers already"));
  }
  joined_.erase(rank);
  return absl::OkStatus();
}

bool ElasticCoordinator::Holds(int rank) const {
  return Has(schedule_.latest().ranks, rank) || joined_.count(rank) > 0;
}

int ElasticCoordinator::WorkersAfterChange() const {
  int n = static_cast<int>(joined_.size());
  for (int r : schedule_.latest().ranks) n += left_.count(r) == 0 ? 1 : 0;
  return n;
}

absl::StatusOr<std::vector<int>> ElasticCoordinator::NextRanks() const {
  const std::vector<int>& now = schedule_.latest().ranks;
  const int next_index = static_cast<int>(schedule_.generations().size());
  if (replay_) {
    if (next_index >= static_cast<int>(replay_->generations().size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("the replayed schedule has no generation ", next_index, ": the recorded run changed no more"));
    }
    const Generation& recorded = replay_->generations()[next_index];
    for (int r : Minus(recorded.ranks, now)) {
      if (joined_.count(r) == 0) {
        return absl::UnavailableError(absl::StrCat("replay: generation ", next_index, " from step ", recorded.from_step,
                                                   " waits for worker ", r, " to join"));
      }
    }
    for (int r : Minus(now, recorded.ranks)) {
      if (left_.count(r) == 0) {
        return absl::UnavailableError(absl::StrCat("replay: generation ", next_index, " from step ", recorded.from_step,
                                                   " waits for worker ", r, " to leave"));
      }
    }
    return recorded.ranks;
  }
  if (!HasPendingChange()) return absl::FailedPreconditionError("no join or leave is pending");
  std::vector<int> next;
  for (int r : now) {
    if (left_.count(r) == 0) next.push_back(r);
  }
  next.insert(next.end(), joined_.begin(), joined_.end());
  std::sort(next.begin(), next.end());
  if (static_cast<int>(next.size()) < schedule_.min_workers()) {
    return absl::FailedPreconditionError(absl::StrCat("only ", next.size(), next.size() == 1 ? " worker" : " workers",
                                                      " would remain (", RankSetText(next), "), below --elastic's MIN ",
                                                      schedule_.min_workers(), ": waiting for a worker to join"));
  }
  return next;
}

absl::StatusOr<int64_t> ElasticCoordinator::ProposeAll(ServerGates& servers, int generation, int64_t not_before) const {
  // A generation covers one step at least: the one before started at from_step.
  int64_t start = std::max(not_before, schedule_.latest().from_step + 1);
  absl::Status first_error;
  for (int i = 0; i < servers.num_servers(); ++i) {
    const absl::StatusOr<elastic::MembershipGate::Proposal> p = servers.Propose(i, generation, not_before);
    if (!p.ok()) {
      if (first_error.ok()) first_error = p.status();
      continue;
    }
    if (p->committed_from >= 0) return p->committed_from;  // committed before a scheduler restart
    if (replay_ && p->highest_step >= not_before) {
      return absl::FailedPreconditionError(absl::StrCat("cannot replay generation ", generation, " from step ",
                                                        not_before, ": server ", i, " took a push of step ",
                                                        p->highest_step, " already"));
    }
    start = std::max(start, p->highest_step + 1);
  }
  if (!first_error.ok()) return first_error;
  return start;
}

absl::StatusOr<std::string> ElasticCoordinator::CommitAll(ServerGates& servers, int generation, Generation next,
                                                          bool drop_pending) {
  committing_ = next;
  absl::Status first_error;
  for (int i = 0; i < servers.num_servers(); ++i) {
    absl::Status s = servers.Commit(i, generation, next, drop_pending);
    if (first_error.ok()) first_error = s;
  }
  DTRAIN_RETURN_IF_ERROR(first_error);
  const Generation before = schedule_.latest();
  DTRAIN_RETURN_IF_ERROR(schedule_.Append(next));
  committing_.reset();
  for (int r : next.ranks) joined_.erase(r);
  for (int r : before.ranks) {
    if (!Has(next.ranks, r)) left_.erase(r);
  }
  return ChangeLine(before, next);
}

bool ElasticCoordinator::HasReplayedChangeToCome() const {
  return replay_ && schedule_.generations().size() < replay_->generations().size();
}

absl::Status ElasticCoordinator::TakeUp(const std::vector<Generation>& held) {
  const auto& known = schedule_.generations();
  // The generation this process commits now is held by the servers that committed it.
  const size_t in_flight = committing_ && taken_up_.empty() ? 1 : 0;
  if (in_flight == 1 && held.size() > known.size() && !(held[known.size()] == *committing_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("a server holds generation ", known.size(), " from step ", held[known.size()].from_step,
                     ", workers ", RankSetText(held[known.size()].ranks), ", while the scheduler commits it from step ",
                     committing_->from_step, ", workers ", RankSetText(committing_->ranks)));
  }
  const size_t have = known.size() + taken_up_.size() + in_flight;
  if (held.size() <= have) return absl::OkStatus();
  for (size_t g = 0; g < have - in_flight; ++g) {
    const Generation& mine = g < known.size() ? known[g] : taken_up_[g - known.size()];
    if (!(held[g] == mine)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "a server's generation ", g, " (from step ", held[g].from_step, ", workers ", RankSetText(held[g].ranks),
          ") differs from the scheduler's (from step ", mine.from_step, ", workers ", RankSetText(mine.ranks), ")"));
    }
  }
  // Checked as a whole before anything changes: the rules of a schedule hold.
  std::vector<Generation> all(known.begin(), known.end());
  all.insert(all.end(), taken_up_.begin(), taken_up_.end());
  all.insert(all.end(), held.begin() + static_cast<std::ptrdiff_t>(have - in_flight), held.end());
  DTRAIN_RETURN_IF_ERROR(
      MembershipSchedule::Create(schedule_.min_workers(), schedule_.max_workers(), std::move(all)).status());
  // In flight: CommitAll ends what it began; the rest follow it.
  taken_up_.insert(taken_up_.end(), held.begin() + static_cast<std::ptrdiff_t>(have), held.end());
  return absl::OkStatus();
}

absl::StatusOr<std::string> ElasticCoordinator::RunChange(ServerGates& servers) {
  const int generation = static_cast<int>(schedule_.generations().size());
  if (!taken_up_.empty()) {
    const Generation next = taken_up_.front();
    // One starting where the latest starts replaced it by dropping its step's pending
    // pushes: a server that has not committed it yet drops them now.
    const bool replaces = next.from_step == schedule_.latest().from_step;
    DTRAIN_ASSIGN_OR_RETURN(std::string line, CommitAll(servers, generation, next, /*drop_pending=*/replaces));
    taken_up_.erase(taken_up_.begin());
    return absl::StrCat(line, " (taken up from the servers)");
  }
  if (HasReplayedChangeToCome()) {
    // A replayed change is proposed before its join or leave comes: the servers then hold
    // the recorded step until it does, so the job cannot run past it (a joiner started
    // late makes the others wait for it instead of breaking the replay).
    const int64_t recorded = replay_->generations()[generation].from_step;
    DTRAIN_ASSIGN_OR_RETURN(const int64_t start, ProposeAll(servers, generation, recorded));
    DTRAIN_ASSIGN_OR_RETURN(std::vector<int> ranks, NextRanks());
    return CommitAll(servers, generation, Generation{start, std::move(ranks)}, /*drop_pending=*/false);
  }
  DTRAIN_ASSIGN_OR_RETURN(std::vector<int> ranks, NextRanks());
  DTRAIN_ASSIGN_OR_RETURN(const int64_t start, ProposeAll(servers, generation, 0));
  return CommitAll(servers, generation, Generation{start, std::move(ranks)}, /*drop_pending=*/false);
}

absl::StatusOr<std::string> ElasticCoordinator::RunChangeFrom(ServerGates& servers, int64_t from_step,
                                                              bool drop_pending) {
  DTRAIN_ASSIGN_OR_RETURN(std::vector<int> ranks, NextRanks());
  // Every key at version from_step (drop_pending) with the latest generation starting
  // there: it merged no step (a joiner that died before its first), so the new one
  // replaces it from the same step, and that generation is left zero-length.
  const bool replaces = drop_pending && from_step == schedule_.latest().from_step && schedule_.generations().size() > 1;
  if (from_step < schedule_.latest().from_step || (from_step == schedule_.latest().from_step && !replaces)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a new generation cannot start at step ", from_step, ": ",
        schedule_.Describe(static_cast<int>(schedule_.generations().size()) - 1), " started there or later"));
  }
  const int generation = static_cast<int>(schedule_.generations().size());
  // The proposal holds the servers' pushes; its answers do not move the step.
  DTRAIN_RETURN_IF_ERROR(ProposeAll(servers, generation, 0).status());
  return CommitAll(servers, generation, Generation{from_step, std::move(ranks)}, drop_pending);
}

}  // namespace dtrain::scheduler
