#include "services/scheduler/liveness.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace dtrain::scheduler {

Liveness::Liveness(LivenessOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = [] { return absl::Now(); };
}

void Liveness::Heard(LivenessRecord* node) const { node->last_heard = Now(); }

void Liveness::Died(LivenessRecord* node, std::string why) const {
  node->dead = true;
  node->dead_at = Now();
  node->death_reason = std::move(why);
}

void Liveness::Revived(LivenessRecord* node) const { node->dead = false; }

std::optional<absl::Duration> Liveness::Overdue(const LivenessRecord& node, absl::Time counted_from) const {
  const absl::Duration silence = Now() - std::max(node.last_heard, counted_from);
  if (silence > options_.heartbeat_timeout) return silence;
  return std::nullopt;
}

bool Liveness::MayRejoin(const LivenessRecord& node) const {
  return RejoinAllowed() && node.dead && Now() - node.dead_at <= options_.rejoin_timeout;
}

std::string SecondsText(absl::Duration d) { return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d)); }

}  // namespace dtrain::scheduler
