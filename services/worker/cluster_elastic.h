// The elastic part of a worker's membership (docs/elastic.md): the membership schedule
// as the scheduler last told it, waits for a change of it, and the announced leave.
// Cluster::elastic() returns it for a worker of an elastic job (--elastic); null
// otherwise, and the job's worker set never changes.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/elastic/membership_proto.h"

namespace dtrain::worker {

class ClusterElastic {
 public:
  virtual ~ClusterElastic() = default;

  // The membership as committed on every server, as last heard (RegisterResponse,
  // then each HeartbeatResponse).
  virtual elastic::Membership membership() const = 0;
  // Blocks until the membership holds more than `generations` generations, and returns
  // it; DEADLINE_EXCEEDED at `deadline` naming the generation awaited, the job's end
  // (Cluster::JobStatus) as it is.
  virtual absl::StatusOr<elastic::Membership> AwaitGenerations(int generations, absl::Time deadline) = 0;
  // Blocks until a generation holds `rank`; DEADLINE_EXCEEDED naming the rank. A
  // joiner connects to the servers after this: Cluster::servers() is then as the
  // scheduler knows them (one may have restarted elsewhere since the registration).
  virtual absl::StatusOr<elastic::Membership> AwaitRank(int rank, absl::Time deadline) = 0;
  // This process registered without a rank into a running job (its rank is in no
  // generation of RegisterResponse.membership): it joins from the step the scheduler
  // commits, and skips the start-up (Configure, the init barrier) as a rejoined one does.
  virtual bool joiner() const = 0;
  // SIGTERM: asks the scheduler to take this worker out of the job. OK: it will (the
  // worker keeps stepping until a push is refused "membership changed" by a generation
  // without it); FAILED_PRECONDITION naming MIN when too few would remain.
  virtual absl::Status AnnounceLeave(const std::string& reason) = 0;
};

}  // namespace dtrain::worker
