#include "common/kv/previous_weights.h"

#include "absl/strings/str_cat.h"

namespace dtrain::kv {

std::string PreviousWeights::HeldText(int64_t current_version) const {
  if (version_ >= 0) return absl::StrCat("the key holds version ", current_version, " and its previous, ", version_);
  return absl::StrCat("the key holds version ", current_version, " only (",
                      kept_ ? "no step has merged on this server yet" : "this store keeps no previous version", ")");
}

}  // namespace dtrain::kv
