#include "common/elastic/membership_gate.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dtrain::elastic {

MembershipGate::MembershipGate(MembershipSchedule schedule, Clock clock)
    : clock_(std::move(clock)), schedule_(std::move(schedule)) {}

absl::Status MembershipChangedError(int generation, const Generation& g) {
  return absl::AbortedError(absl::StrCat("membership changed from step ", g.from_step, ": generation ", generation,
                                         ", workers ", RankSetText(g.ranks)));
}

absl::Status MembershipGate::AdmitPush(int64_t step, int generation) {
  absl::ReaderMutexLock lock(&mu_);
  return AdmitLocked(step, generation);
}

absl::Status MembershipGate::PushIfAdmitted(int64_t step, int generation, absl::FunctionRef<absl::Status()> push) {
  absl::ReaderMutexLock pushes(&push_mu_);
  {
    absl::ReaderMutexLock lock(&mu_);
    if (absl::Status s = AdmitLocked(step, generation); !s.ok()) return s;
  }
  // mu_ is let go: the store's merge asks this gate for the step's ranks.
  return push();
}

absl::Status MembershipGate::AdmitLocked(int64_t step, int generation) {
  if (step < 0 || generation < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("push of step ", step, " in generation ", generation, ": both must be >= 0"));
  }
  const int latest = static_cast<int>(schedule_.generations().size()) - 1;
  if (generation > latest) {
    return absl::UnavailableError(absl::StrCat("membership generation ", generation,
                                               " is not committed on this server yet (it runs ",
                                               schedule_.Describe(latest), "); retry"));
  }
  if (generation < latest) {
    const Generation& next = schedule_.generations()[generation + 1];
    if (step >= next.from_step) return MembershipChangedError(generation + 1, next);
  }
  if (proposed_ >= 0 && step > held_above_) {
    return absl::UnavailableError(
        absl::StrCat("membership change to generation ", proposed_, " pending for ",
                     absl::FormatDuration(absl::Trunc(clock_() - proposed_at_, absl::Seconds(1))), ": step ", step,
                     " waits for its commit (steps up to ", held_above_, " go on); retry"));
  }
  int64_t seen = highest_.load(std::memory_order_relaxed);
  while (step > seen && !highest_.compare_exchange_weak(seen, step, std::memory_order_acq_rel)) {
  }
  return absl::OkStatus();
}

absl::StatusOr<MembershipGate::Proposal> MembershipGate::Propose(int generation, int64_t not_before) {
  absl::MutexLock lock(&mu_);
  const int latest = static_cast<int>(schedule_.generations().size()) - 1;
  Proposal answer;
  if (generation >= 0 && generation <= latest) {
    answer.committed_from = schedule_.generations()[generation].from_step;
    answer.highest_step = highest_.load(std::memory_order_acquire);
    return answer;
  }
  if (generation != latest + 1) {
    return absl::FailedPreconditionError(absl::StrCat("cannot propose membership generation ", generation,
                                                      ": this server runs generation ", latest, ", so the next is ",
                                                      latest + 1));
  }
  if (proposed_ != generation) {
    proposed_ = generation;
    proposed_at_ = clock_();
    proposed_highest_ = highest_.load(std::memory_order_acquire);
    held_above_ = std::max(proposed_highest_, not_before - 1);
  }
  answer.highest_step = proposed_highest_;
  return answer;
}

absl::Status MembershipGate::CheckCommit(int generation, const Generation& next, int64_t lowest_start,
                                         bool* done) const {
  *done = false;
  const int latest = static_cast<int>(schedule_.generations().size()) - 1;
  if (generation >= 0 && generation <= latest) {
    if (schedule_.generations()[generation] == next) {
      *done = true;  // committed before
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(absl::StrCat("membership generation ", generation, " is committed already as ",
                                                      schedule_.Describe(generation), ", not from step ",
                                                      next.from_step, " with workers ", RankSetText(next.ranks)));
  }
  if (proposed_ != generation) {
    return absl::FailedPreconditionError(
        absl::StrCat("membership generation ", generation, " was not proposed to this server (propose it first)"));
  }
  if (next.from_step < lowest_start) {
    return absl::FailedPreconditionError(absl::StrCat("membership generation ", generation, " cannot start at step ",
                                                      next.from_step, ": this server lets steps up to ", held_above_,
                                                      " go on with the workers of before"));
  }
  // The schedule's own rules, without changing it yet.
  MembershipSchedule trial = schedule_;
  return trial.Append(next);
}

absl::Status MembershipGate::Commit(int generation, const Generation& next) {
  absl::MutexLock lock(&mu_);
  bool done = false;
  if (absl::Status s = CheckCommit(generation, next, held_above_ + 1, &done); !s.ok() || done) return s;
  if (absl::Status s = schedule_.Append(next); !s.ok()) return s;
  proposed_ = -1;
  held_above_ = -1;
  return absl::OkStatus();
}

absl::Status MembershipGate::CommitDroppingStep(int generation, const Generation& next,
                                                absl::FunctionRef<absl::Status()> drop) {
  // No push is between its admission and the store from here on, and none is admitted.
  absl::MutexLock pushes(&push_mu_);
  {
    absl::MutexLock lock(&mu_);
    bool done = false;
    // Steps up to held_above_ were let through; S = held_above_ is retaken after the
    // drop, a step above it was never admitted.
    if (absl::Status s = CheckCommit(generation, next, held_above_, &done); !s.ok() || done) return s;
  }
  // mu_ is let go: the store's deadline checks read this gate under their keys' locks,
  // which the drop takes. Only the scheduler's orders (one at a time) change mu_'s state.
  if (absl::Status s = drop(); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = schedule_.Append(next); !s.ok()) return s;
  proposed_ = -1;
  held_above_ = -1;
  return absl::OkStatus();
}

void MembershipGate::RolledBack(int64_t step) {
  absl::MutexLock lock(&mu_);
  const int64_t before = std::max<int64_t>(step - 1, -1);
  if (highest_.load(std::memory_order_acquire) > before) highest_.store(before, std::memory_order_release);
  if (proposed_ >= 0) {
    proposed_highest_ = std::min(proposed_highest_, before);
    held_above_ = std::min(held_above_, before);
  }
}

absl::Status MembershipGate::Abort(int generation) {
  absl::MutexLock lock(&mu_);
  if (proposed_ == generation) {
    proposed_ = -1;
    held_above_ = -1;
  }
  return absl::OkStatus();
}

MembershipSchedule MembershipGate::schedule() const {
  absl::ReaderMutexLock lock(&mu_);
  return schedule_;
}

std::vector<int> MembershipGate::RanksAt(int64_t step) const {
  absl::ReaderMutexLock lock(&mu_);
  return schedule_.At(step).ranks;
}

int MembershipGate::CountAt(int64_t step) const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int>(schedule_.At(step).ranks.size());
}

bool MembershipGate::Holds(int64_t step, int rank) const {
  absl::ReaderMutexLock lock(&mu_);
  const std::vector<int>& ranks = schedule_.At(step).ranks;
  return std::binary_search(ranks.begin(), ranks.end(), rank);
}

std::string MembershipGate::DescribeAt(int64_t step) const {
  absl::ReaderMutexLock lock(&mu_);
  return schedule_.Describe(schedule_.IndexAt(step));
}

}  // namespace dtrain::elastic
