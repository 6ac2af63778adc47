#include "services/worker/kv/resume_states.h"

#include "absl/strings/str_cat.h"

namespace dtrain::worker {

kv::KeyState StateOnly(kv::KeyState k) {
  k.shape.clear();
  k.values.clear();
  k.values.shrink_to_fit();
  return k;
}

absl::StatusOr<ResumeIndex> IndexResumeStates(const checkpoint::OptimizerStates* states, const std::string& optimizer) {
  ResumeIndex index;
  if (states == nullptr) return index;
  if (states->optimizer != optimizer) {
    return absl::FailedPreconditionError(absl::StrCat("the checkpoint's optimizer state is for '", states->optimizer,
                                                      "', this run uses --optimizer ", optimizer));
  }
  index.resuming_ = true;
  for (const auto& r : states->keys) {
    if (!index.records_.emplace(r.key, r).second) {
      return absl::FailedPreconditionError(absl::StrCat("the optimizer state holds key ", r.key, " twice"));
    }
  }
  return index;
}

absl::Status ResumeIndex::Take(uint64_t key, int64_t* version, std::vector<float>* state) {
  if (!resuming_) return absl::OkStatus();
  auto it = records_.find(key);
  if (it == records_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the optimizer state has no entry for key ", key, " (written for another model?)"));
  }
  *version = it->second.version;
  *state = std::move(it->second.optimizer_state);
  records_.erase(it);
  return absl::OkStatus();
}

absl::Status ResumeIndex::CheckAllUsed() const {
  if (records_.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("the optimizer state holds ", records_.size(),
                                                    " keys this model does not have (first: ", records_.begin()->first,
                                                    ")"));
}

}  // namespace dtrain::worker
