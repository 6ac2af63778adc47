#include "common/kv/ahead_steps.h"

#include <utility>

#include "common/kv/stale_weight.h"

namespace dtrain::kv {

void AheadSteps::Hold(int64_t step, int w, const float* grad, int64_t numel, float weight) {
  Step& s = steps_[step];
  if (s.has.size() <= static_cast<size_t>(w)) {
    s.grads.resize(w + 1);
    s.has.resize(w + 1, false);
  }
  AssignWeighed(grad, numel, weight, &s.grads[w]);
  s.has[w] = true;
}

bool AheadSteps::Holds(int64_t step, int w) const {
  auto it = steps_.find(step);
  return it != steps_.end() && static_cast<size_t>(w) < it->second.has.size() && it->second.has[w];
}

bool AheadSteps::TakeStep(int64_t step, const std::function<void(int w, std::vector<float>& grad)>& take) {
  if (steps_.empty() || steps_.begin()->first != step) return false;
  Step next = std::move(steps_.begin()->second);
  steps_.erase(steps_.begin());
  for (size_t w = 0; w < next.has.size(); ++w) {
    if (next.has[w]) take(static_cast<int>(w), next.grads[w]);
  }
  return true;
}

}  // namespace dtrain::kv
