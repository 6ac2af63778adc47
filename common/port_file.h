// --port-file: how a process that listens on "any free port" tells its launcher (or
// test) which port it got.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace dtrain {

// Writes "PORT\n" to PATH.tmp and renames it to `path`, so a reader polling for the
// file never sees it half written. INTERNAL naming the file on failure.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace dtrain
