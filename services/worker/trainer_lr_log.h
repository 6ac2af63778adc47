// Says when the learning rate changes, in MXNet's words (its
// lr_scheduler.FactorScheduler / MultiFactorScheduler):
//   Update[469]: Change learning rate to 5.00000e-02
//
// The schedule runs on the servers (common/kv/optimizer: update_on_kvstore), which
// log nothing. The worker evaluates the same function, kv::Optimizer::LearningRate,
// on the same options it configured the servers with, at the update count the
// servers use for its step: exact for dist_sync and the local kvstores (one update
// per key per step, so count = step). In dist_async every worker's push counts, so
// the count is estimated as step x workers (the servers' lr_steps are scaled the same
// way, see MakeInit); the line then comes at this worker's step nearest the change.
// The number is MXNet's num_update: updates including the one the new rate applies to
// (count + 1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/kv/optimizer.h"

namespace dtrain::worker {

class LrChangeLog {
 public:
  // `updates_per_step`: 1, or the worker count in dist_async.
  LrChangeLog(const kv::OptimizerOptions& options, int64_t updates_per_step);

  // The line for the update of step `step` when the rate changes there, else "".
  std::string LineForStep(int64_t step) const;

  // An elastic job's --lr-step-epochs (`epochs`), which the servers apply by epoch: the
  // line for epoch `epoch`, whose first step is `first_step`, when the rate changes at
  // its start, else "". The rate as the servers compute it before the --elastic-lr
  // factor: the optimizer's lr times its lr_factor once for each of `epochs` up to `epoch`.
  static std::string LineForEpoch(const kv::OptimizerOptions& options, const std::vector<int64_t>& epochs,
                                  int64_t epoch, int64_t first_step);

 private:
  std::unique_ptr<kv::Optimizer> optimizer_;  // null: options the servers refuse anyway
  int64_t updates_per_step_;
};

}  // namespace dtrain::worker
