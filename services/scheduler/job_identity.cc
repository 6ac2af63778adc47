#include "services/scheduler/job_identity.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/job_id.h"

namespace dtrain::scheduler {
namespace {

absl::Status OtherJob(const std::string& job_id, const std::string& who, const std::string& ours) {
  return absl::FailedPreconditionError(
      absl::StrCat(who, " belongs to job '", job_id, "', but this scheduler runs job '", ours, "'"));
}

}  // namespace

JobIdentity::JobIdentity(std::string configured) : id_(std::move(configured)) {
  if (!id_.empty()) source_ = Source::kConfigured;
}

absl::Status JobIdentity::Claim(const std::string& job_id, bool survivor, const std::string& who,
                                std::string* displaced) {
  if (displaced != nullptr) displaced->clear();
  if (job_id.empty() || job_id == id_) {
    // A survivor confirming the id held makes it as strong as a survivor's.
    if (!job_id.empty() && survivor && source_ < Source::kSurvivor) source_ = Source::kSurvivor;
    return absl::OkStatus();
  }
  const Source claim = survivor ? Source::kSurvivor : Source::kNewProcess;
  if (settled_ || claim <= source_) return OtherJob(job_id, who, id_);
  if (displaced != nullptr) *displaced = id_;
  id_ = job_id;
  source_ = claim;
  return absl::OkStatus();
}

void JobIdentity::Settle() {
  settled_ = true;
  if (id_.empty()) id_ = NewJobId();
}

absl::Status JobIdentity::Check(const std::string& job_id, const std::string& who) const {
  if (job_id.empty() || id_.empty() || job_id == id_) return absl::OkStatus();
  return OtherJob(job_id, who, id_);
}

}  // namespace dtrain::scheduler
