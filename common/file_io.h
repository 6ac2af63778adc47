// Whole-file reads with a size cap, and atomic whole-file writes. Every file dtrain
// writes (checkpoints, port files, Prometheus targets, snapshots) goes through
// WriteFileAtomically, so a reader never sees half a file and a crash never leaves a
// truncated one under the real name.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtrain {

// Writes `bytes` to a temp file in `path`'s directory (same file system, so the
// rename is atomic; named with the pid so two writers never share one), fsyncs it,
// renames it over `path` and fsyncs the directory. On failure the temp file is removed
// and the error names `path` and the step that failed.
// `mode`: the file's permissions from its creation on (0600 for private keys: never
// readable by others, not even between create and chmod).
absl::Status WriteFileAtomically(const std::string& path, const std::string& bytes, unsigned mode = 0644);

// Reads `path` whole. RESOURCE_EXHAUSTED once it passes `max_bytes` (checked while
// reading, so a huge or endless file is never held), otherwise the errno's status
// naming the file ("cannot open PATH", "cannot read PATH" for a directory).
absl::StatusOr<std::string> ReadFileLimited(const std::string& path, size_t max_bytes);

}  // namespace dtrain
