// Where a worker's training starts, decided before the epoch loop: the first epoch and
// batch, and whether the end of the epoch before them must be redone. A fresh run
// starts at epoch 0 (or --load-epoch) batch 0; a process that replaced a dead worker
// starts at the step the servers say is unfinished (Recovery::resume_step); after a
// rollback the loop starts again at the step rolled back to (Recovery::Rollback).
// No LibTorch, no kvstore: unit-tested on its own.
#pragma once

#include <cstdint>

namespace dtrain::worker {

struct StepPlan {
  int64_t first_epoch = 0;
  int64_t first_batch = 0;
  // The step to redo (-1: none, a fresh start or a resume from a checkpoint).
  int64_t resume_step = -1;
  // The step to redo opens an epoch after the one training started from: the weights
  // just pulled are the previous epoch's end, whose batch-norm statistics, checkpoint
  // (worker 0, if it was not completed) and validation part are redone first, since
  // the worker this one replaces may have died before finishing them.
  bool redo_epoch_end = false;
};

// `load_epoch`: --load-epoch (0: none); `resume_step`: Recovery::resume_step() (-1:
// none); `batches_per_epoch` >= 1.
StepPlan PlanSteps(int64_t load_epoch, int64_t resume_step, int64_t batches_per_epoch);

// After a rollback to step `step` (the weights are exactly that step's): its epoch and
// batch, redone on the same batches. Nothing of an epoch's end is redone: every worker
// finished the ones before `step` (a checkpoint written again would be the same bytes).
StepPlan PlanRollback(int64_t step, int64_t batches_per_epoch);

}  // namespace dtrain::worker
