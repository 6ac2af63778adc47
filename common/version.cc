#include "common/version.h"

#include "absl/strings/str_cat.h"
#include "common/version_info.h"

namespace dtrain {

std::string VersionText(const std::string& program) {
  return absl::StrCat(program, " ", DTRAIN_VERSION, " (git ", DTRAIN_GIT_COMMIT, ")");
}

}  // namespace dtrain
