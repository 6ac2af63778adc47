#include "common/elastic/membership_schedule.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain::elastic {

bool operator==(const Generation& a, const Generation& b) { return a.from_step == b.from_step && a.ranks == b.ranks; }

bool operator==(const MembershipSchedule& a, const MembershipSchedule& b) {
  return a.min_workers_ == b.min_workers_ && a.max_workers_ == b.max_workers_ && a.generations_ == b.generations_;
}

std::string RankSetText(const std::vector<int>& ranks) { return absl::StrCat("{", absl::StrJoin(ranks, ","), "}"); }

MembershipSchedule MembershipSchedule::Fixed(int num_workers) {
  MembershipSchedule s(num_workers, num_workers);
  Generation g;
  g.ranks.resize(static_cast<size_t>(std::max(num_workers, 0)));
  std::iota(g.ranks.begin(), g.ranks.end(), 0);
  s.generations_.push_back(std::move(g));
  return s;
}

absl::StatusOr<MembershipSchedule> MembershipSchedule::Create(int min_workers, int max_workers,
                                                              std::vector<Generation> generations) {
  if (min_workers < 1 || max_workers < min_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker bounds ", min_workers, ":", max_workers, ": need 1 <= MIN <= MAX"));
  }
  if (generations.empty()) return absl::InvalidArgumentError("a membership schedule needs at least one generation");
  MembershipSchedule s(min_workers, max_workers);
  for (Generation& g : generations) {
    if (absl::Status st = s.Append(std::move(g)); !st.ok()) return st;
  }
  return s;
}

absl::Status MembershipSchedule::CheckNext(const Generation& g, int index) const {
  const std::string where = absl::StrCat("generations[", index, "]");
  if (index == 0 && g.from_step != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".from_step: the first generation starts at step 0, not ", g.from_step));
  }
  // Generation 0 merges at least step 0 (the lr factor's reference is its count); a
  // later one may start where the one before it starts, which then merges no step.
  const bool too_early = index == 1 ? g.from_step <= generations_.back().from_step
                                    : index > 1 && g.from_step < generations_.back().from_step;
  if (too_early) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".from_step: ", g.from_step, " is not after generations[",
                                                   index - 1, "].from_step ", generations_.back().from_step));
  }
  const int n = static_cast<int>(g.ranks.size());
  if (n < min_workers_ || n > max_workers_) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".workers: ", n, " workers ", RankSetText(g.ranks),
                                                   ", outside the bounds ", min_workers_, ":", max_workers_));
  }
  for (int i = 0; i < n; ++i) {
    if (g.ranks[i] < 0 || g.ranks[i] >= max_workers_) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".workers: rank ", g.ranks[i], " outside [0, ", max_workers_, ")"));
    }
    if (i > 0 && g.ranks[i] <= g.ranks[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".workers: ", RankSetText(g.ranks), " is not strictly ascending (each rank once)"));
    }
  }
  return absl::OkStatus();
}

absl::Status MembershipSchedule::Append(Generation next) {
  if (absl::Status s = CheckNext(next, static_cast<int>(generations_.size())); !s.ok()) return s;
  generations_.push_back(std::move(next));
  return absl::OkStatus();
}

int MembershipSchedule::IndexAt(int64_t step) const {
  // The last generation whose from_step <= step; generation 0 starts at 0.
  auto it = std::upper_bound(generations_.begin(), generations_.end(), step,
                             [](int64_t s, const Generation& g) { return s < g.from_step; });
  return std::max(0, static_cast<int>(it - generations_.begin()) - 1);
}

absl::StatusOr<int> MembershipSchedule::LowestFreeRank() const {
  const std::vector<int>& held = latest().ranks;
  for (int r = 0; r < max_workers_; ++r) {
    if (!std::binary_search(held.begin(), held.end(), r)) return r;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("all ", max_workers_, " worker ranks are taken (--elastic ", min_workers_, ":", max_workers_, ")"));
}

MembershipSchedule MembershipSchedule::ResumedAt(int64_t step) const {
  MembershipSchedule out(min_workers_, max_workers_);
  const int in_force = IndexAt(step);
  for (int i = 0; i < in_force; ++i) out.generations_.push_back(generations_[i]);
  Generation now = generations_[in_force];
  std::vector<int> renumbered(now.ranks.size());
  std::iota(renumbered.begin(), renumbered.end(), 0);
  if (now.ranks != renumbered) {
    // Its workers become 0 .. k-1 from `step` on (the data plan deals by position, so
    // they take what the saved ones would have); the one before keeps its own start.
    if (now.from_step < step) out.generations_.push_back(now);
    now = Generation{step, std::move(renumbered)};
  }
  out.generations_.push_back(std::move(now));
  return out;
}

bool MembershipSchedule::ZeroLength(int index) const {
  const size_t next = static_cast<size_t>(index) + 1;
  return next < generations_.size() && generations_[next].from_step == generations_[index].from_step;
}

std::string MembershipSchedule::Describe(int index) const {
  const Generation& g = generations_[index];
  return absl::StrCat("generation ", index, " from step ", g.from_step, ", workers ", RankSetText(g.ranks));
}

}  // namespace dtrain::elastic
