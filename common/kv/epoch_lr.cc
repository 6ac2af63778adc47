#include "common/kv/epoch_lr.h"

#include "absl/strings/str_cat.h"

namespace dtrain::kv {

absl::Status CheckEpochLrSteps(const EpochLrSteps& steps) {
  if (!steps.enabled()) return absl::OkStatus();
  if (steps.epochs.size() > kMaxEpochLrSteps) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch_lr.epochs has ", steps.epochs.size(), " entries, over the cap of ", kMaxEpochLrSteps));
  }
  if (steps.num_examples < 1 || steps.batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("epoch_lr: num_examples ", steps.num_examples, " and batch_size ",
                                                   steps.batch_size, " must be >= 1"));
  }
  for (size_t i = 0; i < steps.epochs.size(); ++i) {
    if (steps.epochs[i] < 1 || (i > 0 && steps.epochs[i] <= steps.epochs[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("epoch_lr.epochs[", i, "] = ", steps.epochs[i], ": want ascending epochs >= 1"));
    }
  }
  return absl::OkStatus();
}

}  // namespace dtrain::kv
