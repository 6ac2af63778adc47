// Bounded staleness (SSP, MergeMode::kSsp) for one key: pushes for steps after the
// key's version, held until it is their step's turn (at most `staleness` steps, which
// the merge rule enforces). A part of the shard store's key (key_entry.h): the store
// holds the key's lock around every call. Empty in the other modes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace dtrain::kv {

class AheadSteps {
 public:
  // Holds a copy of worker `w`'s gradient (numel floats) for `step`, times `weight`
  // (stale_weight.h; 1: the gradient as pushed).
  void Hold(int64_t step, int w, const float* grad, int64_t numel, float weight = 1.0f);

  // Whether worker `w`'s push for `step` is held (a retry of it is then ignored).
  bool Holds(int64_t step, int w) const;

  // When the earliest held step is `step`, forgets it and hands each of its pushes to
  // `take(w, grad)`, in rank order (`take` may swap `grad` out), and returns true.
  bool TakeStep(int64_t step, const std::function<void(int w, std::vector<float>& grad)>& take);

  void clear() { steps_.clear(); }
  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    std::vector<std::vector<float>> grads;  // by rank
    std::vector<bool> has;
  };
  std::map<int64_t, Step> steps_;
};

}  // namespace dtrain::kv
