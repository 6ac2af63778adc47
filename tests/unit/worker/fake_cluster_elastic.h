// For the worker's elastic tests: ClusterElastic over a MembershipWatch that the test
// feeds as the scheduler's heartbeats would, and a leave that answers as told.
#pragma once

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "services/worker/cluster_elastic.h"
#include "services/worker/membership_watch.h"

namespace dtrain::worker::testing {

class FakeClusterElastic final : public ClusterElastic {
 public:
  FakeClusterElastic(elastic::Membership initial, bool joiner = false) : watch_(std::move(initial)), joiner_(joiner) {}

  // What the scheduler's next heartbeat says.
  void Heartbeat(const elastic::Membership& m) { watch_.Update(elastic::MembershipToProto(m)); }
  void SetLeaveAnswer(absl::Status answer) {
    absl::MutexLock lock(&mu_);
    leave_answer_ = std::move(answer);
  }
  std::vector<std::string> leaves() const {
    absl::MutexLock lock(&mu_);
    return leaves_;
  }

  elastic::Membership membership() const override { return watch_.current(); }
  absl::StatusOr<elastic::Membership> AwaitGenerations(int generations, absl::Time deadline) override {
    return watch_.AwaitGenerations(generations, deadline);
  }
  absl::StatusOr<elastic::Membership> AwaitRank(int rank, absl::Time deadline) override {
    return watch_.AwaitRank(rank, deadline);
  }
  bool joiner() const override { return joiner_; }
  absl::Status AnnounceLeave(const std::string& reason) override {
    absl::MutexLock lock(&mu_);
    leaves_.push_back(reason);
    return leave_answer_;
  }

 private:
  MembershipWatch watch_;
  const bool joiner_;
  mutable absl::Mutex mu_;
  absl::Status leave_answer_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> leaves_ ABSL_GUARDED_BY(mu_);
};

// A membership of `min`..`max` workers with the given generations, checked.
inline elastic::Membership MakeMembership(int min, int max, std::vector<elastic::Generation> generations) {
  elastic::Membership m;
  m.schedule = *elastic::MembershipSchedule::Create(min, max, std::move(generations));
  m.workers_at_start = static_cast<int64_t>(m.schedule.generations().front().ranks.size());
  return m;
}

}  // namespace dtrain::worker::testing
