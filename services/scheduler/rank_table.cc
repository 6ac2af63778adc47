#include "services/scheduler/rank_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dtrain::scheduler {

RankTable::RankTable(Role role, int size) : role_(role), size_(size) {}

int RankTable::LowestFree(const std::vector<RankOccupant>& occupants) {
  for (size_t r = 0; r < occupants.size(); ++r) {
    if (!occupants[r].present) return static_cast<int>(r);
  }
  return -1;
}

absl::StatusOr<int> RankTable::Pick(int requested, uint64_t held, bool started,
                                    const std::vector<RankOccupant>& occupants, int* moved_to) const {
  *moved_to = -1;
  if (requested < 0) {
    // The lowest free rank; failing that, the lowest rank of a dead node (a restart).
    if (const int free_rank = LowestFree(occupants); free_rank >= 0) return free_rank;
    for (size_t r = 0; r < occupants.size(); ++r) {
      if (!occupants[r].live) return static_cast<int>(r);
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("all ", size_, " ", RoleName(role_), " ranks are held by live nodes"));
  }
  if (requested >= size_) {
    return absl::InvalidArgumentError(absl::StrCat("requested ", RoleName(role_), " rank ", requested,
                                                   " but the job has ", size_, " ", RoleName(role_), "s (ranks 0..",
                                                   size_ - 1, ")"));
  }
  const RankOccupant& holder = occupants[requested];
  if (holder.present && holder.provisional && !started) {
    // Its holder did not ask for it: it moves to another free rank, and the rank is free.
    *moved_to = LowestFree(occupants);
    if (*moved_to >= 0) return requested;
  }
  if (held > 0 && holder.present) {
    // A process that knows its incarnation: the newer one holds the rank.
    if (held < holder.incarnation) return absl::FailedPreconditionError(FencedText(requested, held, holder));
  } else if (holder.live) {
    return absl::AlreadyExistsError(absl::StrCat(RoleName(role_), " rank ", requested, " is already held by pid ",
                                                 holder.pid, " on ", holder.hostname, " (", holder.state, ")"));
  }
  return requested;
}

uint64_t RankTable::Admit(int rank, uint64_t held, bool started) {
  uint64_t& last = last_[rank];
  // Before the job starts nobody is fenced: every first process is incarnation 1.
  const uint64_t incarnation = held > 0 ? held : started ? last + 1 : 1;
  last = std::max(last, incarnation);
  return incarnation;
}

uint64_t RankTable::Replace(int rank) {
  uint64_t floor = 1;
  if (auto it = admitted_elsewhere_.find(rank); it != admitted_elsewhere_.end()) floor = std::max(floor, it->second);
  uint64_t& last = last_[rank];
  last = std::max(last, floor) + 1;
  return last;
}

void RankTable::NoteAdmittedElsewhere(int rank, uint64_t incarnation) {
  uint64_t& floor = admitted_elsewhere_[rank];
  floor = std::max(floor, incarnation);
}

std::string RankTable::FencedText(int rank, uint64_t stale, const RankOccupant& holder) const {
  return absl::StrCat("fenced: ", RoleName(role_), " ", rank, " incarnation ", stale, " replaced by ",
                      holder.incarnation, " (pid ", holder.pid, " on ", holder.hostname, ")");
}

}  // namespace dtrain::scheduler
