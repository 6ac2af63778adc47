#include "services/worker/stall_advice.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dtrain::worker {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

void StallAdvisor::StepDone(double compute, double blocked) {
  if (compute_.size() < kWindowSteps) {
    compute_.push_back(compute);
    blocked_.push_back(blocked);
    return;
  }
  compute_[next_] = compute;
  blocked_[next_] = blocked;
  next_ = (next_ + 1) % kWindowSteps;
}

std::optional<std::string> StallAdvisor::Advice(KVStoreMode mode, int64_t staleness, bool weigh_stale) const {
  const bool sync = mode == KVStoreMode::kDistSync || mode == KVStoreMode::kDistDeviceSync;
  const bool ssp = mode == KVStoreMode::kDistSsp;
  if ((!sync && !ssp) || compute_.empty()) return std::nullopt;
  const double median_blocked = Quantile(blocked_, 0.5);
  std::vector<double> steps(compute_.size());
  double total = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i] = compute_[i] + std::min(blocked_[i], median_blocked);  // a step without the stall
    total += compute_[i] + blocked_[i];
  }
  const double step = std::max(1e-6, Quantile(steps, 0.5));
  const double threshold = std::max(kStallFactor * step, kMinStallSeconds);
  std::vector<double> stalls;  // each stall's excess over a usual step's blocked time
  double stalled = 0;
  for (double b : blocked_) {
    if (b - median_blocked > threshold) {
      stalls.push_back(b - median_blocked);
      stalled += b - median_blocked;
    }
  }
  if (static_cast<int>(stalls.size()) < kMinStalls || stalled < kMinStallShare * total) return std::nullopt;
  const double p90 = Quantile(stalls, 0.9);
  // Under dist_ssp a stall is what a pause lasted beyond the slack, so a pause is the
  // slack plus the stall.
  const int64_t stall_steps = static_cast<int64_t>(std::ceil(p90 / step));
  const int64_t pause_steps = (ssp ? staleness : 0) + stall_steps + 1;  // + the step it stalled in
  const int64_t advised = static_cast<int64_t>(std::ceil(kCoverShare * pause_steps));
  if (ssp && advised <= staleness) return std::nullopt;  // the rest is the share left uncovered on purpose
  const std::string what = absl::StrFormat(
      "waited %.1f s of %.1f s (%.0f%%) in %d stalls for other workers (90%% of them under %.2f s, %d steps of "
      "%.1f ms): they paused rather than ran slow",
      stalled, total, 100.0 * stalled / total, stalls.size(), p90, stall_steps, 1000.0 * step);
  // What a longer lead would cost depends on whether stale pushes are weighed.
  const char* cost = weigh_stale ? "their pushes from stale weights count less by how stale; a lead as long as the "
                                   "pause would make more of them count for little"
                                 : "with --no-weigh-stale their pushes from stale weights count in full; a lead as "
                                   "long as the pause would apply more of them";
  const std::string why =
      absl::StrFormat(" lets the others go on through %d of such a pause's %d steps (%s)", advised, pause_steps, cost);
  if (sync) {
    return absl::StrCat(what, "; --kv-store dist_ssp --staleness ", advised, why,
                        "; the weights then differ from dist_sync's");
  }
  return absl::StrCat(what, " beyond --staleness ", staleness, "; --staleness ", advised, why);
}

}  // namespace dtrain::worker
