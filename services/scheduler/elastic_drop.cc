#include "services/scheduler/elastic_drop.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dtrain::scheduler {

absl::StatusOr<DropPlan> PlanDrop(int rank, const std::vector<ServerVersions>& servers,
                                  std::optional<int64_t> common_snapshot_step) {
  if (servers.empty()) return absl::InvalidArgumentError("no server versions to plan a dropped worker on");
  int64_t lo = servers[0].min_version, hi = servers[0].max_version;
  for (const ServerVersions& s : servers) {
    lo = std::min(lo, s.min_version);
    hi = std::max(hi, s.max_version);
  }
  if (lo == hi) return DropPlan{DropPlan::Kind::kDropPending, lo};
  if (common_snapshot_step.has_value() && *common_snapshot_step <= lo) {
    return DropPlan{DropPlan::Kind::kRollBack, *common_snapshot_step};
  }
  return absl::FailedPreconditionError(
      absl::StrCat("worker ", rank, " died in step ", lo, " after some keys merged it (versions ", lo, "..", hi,
                   "); without a snapshot every server holds", common_snapshot_step ? " of a step before it" : "",
                   ", that step cannot be taken back (dtrain-server --snapshot-every)"));
}

}  // namespace dtrain::scheduler
