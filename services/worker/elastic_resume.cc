#include "services/worker/elastic_resume.h"

#include "absl/strings/str_cat.h"
#include "common/elastic/data_plan.h"
#include "common/elastic/membership_file.h"
#include "common/status_macros.h"

namespace dtrain::worker {

absl::Status SaveCheckpointMembership(const std::string& prefix, int epoch, const elastic::MembershipSchedule& schedule,
                                      int64_t step) {
  return elastic::WriteMembershipFile(elastic::CheckpointMembershipPath(prefix, epoch), schedule.ResumedAt(step));
}

absl::StatusOr<int64_t> ElasticResumeStep(const std::string& prefix, int64_t load_epoch, int64_t seed,
                                          int64_t num_examples, int64_t batch_size,
                                          const elastic::MembershipSchedule& schedule) {
  const std::string path = elastic::CheckpointMembershipPath(prefix, static_cast<int>(load_epoch));
  absl::StatusOr<elastic::MembershipSchedule> saved = elastic::ReadMembershipFile(path);
  if (!saved.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--load-epoch ", load_epoch,
                     " with --elastic needs the membership the checkpoint was saved with: ", saved.status().message()));
  }
  const elastic::DataPlan plan(seed, num_examples, batch_size, schedule);
  DTRAIN_ASSIGN_OR_RETURN(const int64_t step, plan.EpochFirstStep(load_epoch));
  // A worker restarted later in the resumed job sees the changes since: only the part up
  // to the resume is the checkpoint's.
  if (!(schedule.ResumedAt(step) == *saved)) {
    return absl::FailedPreconditionError(absl::StrCat("the scheduler did not start with the membership of checkpoint ",
                                                      load_epoch, " (", path, "): start it with --resume-membership ",
                                                      path, " (dtrain launch does so for --load-epoch)"));
  }
  return step;
}

}  // namespace dtrain::worker
