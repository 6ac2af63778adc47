// A prefix's checkpoint files as one set, written by one run: what is there, and the
// temp files a killed writer left behind. The trainer decides what to do with them;
// nothing here removes a checkpoint on its own.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain::checkpoint {

struct CheckpointFile {
  int epoch = 0;
  std::string path;  // PREFIX-NNNN.params, .states or .safetensors
};

// Every PREFIX-NNNN.params, .states and .safetensors (names exactly as ParamsPath,
// StatesPath and SafetensorsPath write them), by epoch then name. Empty when the directory does not exist
// yet; NOT_FOUND naming it if it exists but cannot be listed.
absl::StatusOr<std::vector<CheckpointFile>> ListCheckpointFiles(const std::string& prefix);

// Removes PREFIX-*.tmp.PID files (common/file_io's temp names) whose writer process no
// longer exists, and returns their paths. A live PID's file is kept: its writer may
// still rename it into place.
absl::StatusOr<std::vector<std::string>> SweepStaleTempFiles(const std::string& prefix);

}  // namespace dtrain::checkpoint
