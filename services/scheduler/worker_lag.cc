#include "services/scheduler/worker_lag.h"

namespace dtrain::scheduler {

void WorkerLagTracker::Record(int rank, int64_t at_unix_ms, int64_t step) {
  if (at_unix_ms <= 0) return;
  absl::MutexLock lock(&mu_);
  std::map<int64_t, int64_t>& ticks = ticks_[rank];
  ticks[at_unix_ms] = step;
  while (ticks.size() > kTicksKept) ticks.erase(ticks.begin());
}

std::optional<v1::WorkerLag> WorkerLagTracker::Lag(const std::vector<int>& ranks) const {
  if (ranks.empty()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto first = ticks_.find(ranks.front());
  if (first == ticks_.end()) return std::nullopt;
  for (auto tick = first->second.rbegin(); tick != first->second.rend(); ++tick) {
    v1::WorkerLag lag;
    lag.set_at_unix_ms(tick->first);
    bool everyone = true;
    bool any = false;
    for (int rank : ranks) {
      auto it = ticks_.find(rank);
      if (it == ticks_.end()) return std::nullopt;  // a worker that never sampled: no common tick
      auto step = it->second.find(tick->first);
      if (step == it->second.end()) {
        everyone = false;
        break;
      }
      if (!any || step->second < lag.slowest_step()) {
        lag.set_slowest_step(step->second);
        lag.set_slowest_rank(rank);
      }
      if (!any || step->second > lag.fastest_step()) lag.set_fastest_step(step->second);
      any = true;
    }
    if (!everyone) continue;
    lag.set_steps(lag.fastest_step() - lag.slowest_step());
    return lag;
  }
  return std::nullopt;
}

std::vector<int> WorkersInJob(const std::vector<v1::NodeInfo>& nodes) {
  std::vector<int> ranks;
  for (const v1::NodeInfo& n : nodes) {
    if (n.role() != v1::ROLE_WORKER || n.state() == v1::NODE_STATE_DEAD || n.state() == v1::NODE_STATE_FINISHED) {
      continue;
    }
    ranks.push_back(n.rank());
  }
  return ranks;
}

}  // namespace dtrain::scheduler
