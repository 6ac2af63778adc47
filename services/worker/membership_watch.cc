#include "services/worker/membership_watch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace dtrain::worker {
namespace {

// How often a wait looks at the job's status: the scheduler ending the job stops it.
constexpr absl::Duration kJobCheckEvery = absl::Milliseconds(200);

}  // namespace

int FirstGenerationHolding(const elastic::MembershipSchedule& schedule, int rank) {
  const auto& generations = schedule.generations();
  for (size_t i = 0; i < generations.size(); ++i) {
    const std::vector<int>& ranks = generations[i].ranks;
    if (std::binary_search(ranks.begin(), ranks.end(), rank)) return static_cast<int>(i);
  }
  return -1;
}

MembershipWatch::MembershipWatch(elastic::Membership initial, std::function<absl::Status()> job_status)
    : job_status_(std::move(job_status)), membership_(std::move(initial)) {}

bool MembershipWatch::Update(const v1::MembershipState& state) {
  absl::StatusOr<elastic::Membership> m = elastic::MembershipFromProto(state);
  absl::MutexLock lock(&mu_);
  if (!m.ok()) {
    if (!warned_) DTRAIN_LOG(WARNING) << "ignoring a membership from the scheduler: " << m.status().message();
    warned_ = true;
    return false;
  }
  if (m->schedule.generations().size() < membership_.schedule.generations().size()) return false;
  if (m->schedule == membership_.schedule) return false;
  membership_ = *std::move(m);
  changed_.SignalAll();
  return true;
}

elastic::Membership MembershipWatch::current() const {
  absl::MutexLock lock(&mu_);
  return membership_;
}

absl::StatusOr<elastic::Membership> MembershipWatch::Await(const std::function<bool(const elastic::Membership&)>& ready,
                                                           const std::string& what, absl::Time deadline) {
  const absl::Time start = absl::Now();
  while (true) {
    if (job_status_) {
      if (absl::Status job = job_status_(); !job.ok()) return job;
    }
    absl::MutexLock lock(&mu_);
    if (ready(membership_)) return membership_;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      const elastic::MembershipSchedule& s = membership_.schedule;
      return absl::DeadlineExceededError(absl::StrCat(
          "waited ", absl::FormatDuration(absl::Trunc(now - start, absl::Seconds(1))), " for ", what,
          " (the scheduler's membership holds ", s.Describe(static_cast<int>(s.generations().size()) - 1), ")"));
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, now + kJobCheckEvery));
  }
}

absl::StatusOr<elastic::Membership> MembershipWatch::AwaitGenerations(int generations, absl::Time deadline) {
  return Await(
      [generations](const elastic::Membership& m) {
        return static_cast<int>(m.schedule.generations().size()) > generations;
      },
      absl::StrCat("membership generation ", generations), deadline);
}

absl::StatusOr<elastic::Membership> MembershipWatch::AwaitRank(int rank, absl::Time deadline) {
  return Await([rank](const elastic::Membership& m) { return FirstGenerationHolding(m.schedule, rank) >= 0; },
               absl::StrCat("a membership generation holding worker ", rank), deadline);
}

}  // namespace dtrain::worker
