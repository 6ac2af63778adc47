#include "services/worker/step_plan.h"

namespace dtrain::worker {

StepPlan PlanSteps(int64_t load_epoch, int64_t resume_step, int64_t batches_per_epoch) {
  StepPlan plan;
  plan.first_epoch = load_epoch;
  if (resume_step < 0) return plan;
  plan.resume_step = resume_step;
  plan.first_epoch = resume_step / batches_per_epoch;
  plan.first_batch = resume_step % batches_per_epoch;
  plan.redo_epoch_end = plan.first_batch == 0 && plan.first_epoch > load_epoch;
  return plan;
}

StepPlan PlanRollback(int64_t step, int64_t batches_per_epoch) {
  StepPlan plan;
  plan.resume_step = step;
  plan.first_epoch = step / batches_per_epoch;
  plan.first_batch = step % batches_per_epoch;
  return plan;
}

}  // namespace dtrain::worker
