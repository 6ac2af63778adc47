// --port-file: how a process that listens on "any free port" tells its launcher (or
// test) which port it got.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace dtrain {

// Writes "PORT\n" to `path` atomically (common/file_io.h), so a reader polling for the
// file never sees it half written.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace dtrain
