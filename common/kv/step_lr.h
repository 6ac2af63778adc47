// The factor each step's learning rate is multiplied by, for a store whose workers
// change while the job runs (docs/elastic.md: the effective batch grows and shrinks
// with the workers, --elastic-lr scale). A store without one uses the optimizer's lr.
#pragma once

#include <cstdint>

#include "common/kv/epoch_lr.h"

namespace dtrain::kv {

// Thread-safe: read under a key's lock by every update.
class StepLr {
 public:
  virtual ~StepLr() = default;
  // The factor (> 0) for the update that merges step `step`; exactly 1.0 where the
  // lr is left as it is, which changes no float operation of the update. `epoch_lr`
  // (the store's StoreConfig::epoch_lr): `lr_factor` more for each of its epochs that
  // started by `step`'s.
  virtual double LrFactorAt(int64_t step, const EpochLrSteps& epoch_lr, double lr_factor) const = 0;
};

}  // namespace dtrain::kv
