// What the scheduler does when a worker of an elastic job died and was not replaced
// within --rejoin-timeout (docs/elastic.md): its last step may be merged on some keys
// and not on others, and a merged step cannot be taken back key by key (the optimizer
// state moved too). So the new generation starts where that is exact:
//   - every key on every server at the same version v: nothing of step v is merged;
//     the pushes pending for it are dropped and the survivors redo step v;
//   - otherwise the newest step every server has a snapshot of (the rollback of
//     docs/recovery.md), from which the new workers recompute;
//   - otherwise the job fails, naming the worker and why.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain::scheduler {

// One server's keys' versions (ShardStore::Versions): the least and the greatest.
struct ServerVersions {
  int64_t min_version = 0;
  int64_t max_version = 0;
};

struct DropPlan {
  enum class Kind {
    kDropPending,  // all keys at `step`: drop its pending pushes, start there
    kRollBack,     // roll every server back to its snapshot of `step`, start there
  };
  Kind kind = Kind::kDropPending;
  int64_t step = 0;  // where the new generation starts
};

// The plan for dropping dead worker `rank`, from every server's versions and the newest
// step all servers have a snapshot of (nullopt: none, or no --snapshot-every).
// FAILED_PRECONDITION when neither is exact ("worker 2 died in step 812 after some keys
// merged it (versions 812..813); without a snapshot every server holds, that step
// cannot be taken back"); INVALID_ARGUMENT for no servers.
absl::StatusOr<DropPlan> PlanDrop(int rank, const std::vector<ServerVersions>& servers,
                                  std::optional<int64_t> common_snapshot_step);

}  // namespace dtrain::scheduler
