// dist_ssp: how much a push computed on stale weights counts in its step.
//
// A worker running ahead under bounded staleness computes its gradient for step t on
// the weights of an older version v (the last it pulled): its gradient points where
// the weights were `lag` = t - v steps ago. Counted in full, a worker that ran 20 steps
// ahead through another's pause adds 20 gradients of the same old point to the next 20
// steps, and with momentum 0.9 LeNet diverged (docs/tuning.md). Each push is scaled by
// 1 / (1 + lag) before it joins its step's mean, which is divided by the number of
// workers as always: staleness-aware SGD's learning rate over the staleness, per
// gradient (Zhang et al., IJCAI 2016). A step with stale pushes moves the weights less.
// Dividing by the weights' sum instead (the step keeps its size, fresh gradients lead)
// did no better over five seeded runs of tests/bench/straggler_pauses.sh, and a milder
// 1 / sqrt(1 + lag) lost 13 points. A fresh push (lag 0) is not touched: steps without
// stale pushes merge bit for bit as before.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/kv/store_config.h"

namespace dtrain::kv {

inline float StaleWeight(int64_t lag) { return lag <= 0 ? 1.0f : 1.0f / static_cast<float>(1 + lag); }

// *out := grad * weight (numel floats), in one pass; a weight of 1 copies bit for bit.
inline void AssignWeighed(const float* grad, int64_t numel, float weight, std::vector<float>* out) {
  out->assign(grad, grad + numel);
  if (weight == 1.0f) return;
  for (float& g : *out) g *= weight;
}

// A push's lag as the wire gives it: 0 in every mode; in kSsp up to `staleness` (a
// worker never holds weights older than that: its pull waited for them) and `step`.
inline absl::Status CheckPushLag(int64_t lag, MergeMode mode, int staleness, int worker_rank, int64_t step,
                                 uint64_t key) {
  if (lag == 0) return absl::OkStatus();
  const int64_t most = mode == MergeMode::kSsp ? std::min<int64_t>(staleness, step) : 0;
  if (lag > 0 && lag <= most) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "push of key ", key, " step ", step, " by worker ", worker_rank, " says its gradient is ", lag, " steps stale; ",
      mode == MergeMode::kSsp ? absl::StrCat("--staleness ", staleness, " allows 0 to ", most)
                              : std::string("only dist_ssp pushes may be stale")));
}

}  // namespace dtrain::kv
