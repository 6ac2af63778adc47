// The latest membership of an elastic job as the scheduler sends it (RegisterResponse,
// HeartbeatResponse.membership), and the waits for it to change: what SchedulerCluster
// keeps for ClusterElastic, without gRPC (the heartbeat thread calls Update).
#pragma once

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/elastic/membership_proto.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::worker {

class MembershipWatch {
 public:
  // `job_status`: checked between the waits' slices, so that the job's end stops a
  // wait at once (null: never ends).
  explicit MembershipWatch(elastic::Membership initial, std::function<absl::Status()> job_status = nullptr);

  // A membership from the scheduler. One that does not parse (MembershipFromProto) or
  // has fewer generations than the one held (an older answer) is ignored, the first
  // logged with why; returns whether it was taken.
  bool Update(const v1::MembershipState& state);

  elastic::Membership current() const;
  // Blocks until the membership holds more than `generations` generations.
  // DEADLINE_EXCEEDED "waited 120 s for membership generation 2 (held: generation 1 from
  // step 180, workers {0,1})" at `deadline`; the job's end as job_status says.
  absl::StatusOr<elastic::Membership> AwaitGenerations(int generations, absl::Time deadline);
  // Blocks until some generation holds `rank`; errors as above, naming the rank.
  absl::StatusOr<elastic::Membership> AwaitRank(int rank, absl::Time deadline);

 private:
  absl::StatusOr<elastic::Membership> Await(const std::function<bool(const elastic::Membership&)>& ready,
                                            const std::string& what, absl::Time deadline);

  const std::function<absl::Status()> job_status_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  elastic::Membership membership_ ABSL_GUARDED_BY(mu_);
  bool warned_ ABSL_GUARDED_BY(mu_) = false;
};

// Whether a generation of `schedule` holds `rank`: the index of the first that does,
// -1 when none.
int FirstGenerationHolding(const elastic::MembershipSchedule& schedule, int rank);

}  // namespace dtrain::worker
