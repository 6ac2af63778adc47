// What build this is: "dtrain 0.1.0 (git abc1234)". The commit comes from a header
// generated at build time (common/version_info.cmake); "unknown" without git.
#pragma once

#include <string>

namespace dtrain {

// "dtrain-server 0.1.0 (git abc1234)" for `program` "dtrain-server".
std::string VersionText(const std::string& program);

}  // namespace dtrain
