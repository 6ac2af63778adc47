// PREFIX-metrics.csv: one row of figures per finished epoch, appended by worker 0,
// read by `dtrain plot`. No prometheus here: the `dtrain` command line reads it too.
//
//   epoch,samples,time_cost_s,samples_per_sec,train_loss,train_accuracy,validation_accuracy,workers,unix_time
//   0,30000,12.345,2430.1,0.612,0.781,0.842,2,1718000000
//
// `epoch` is 0-based as in the logs; samples and speed are worker 0's (the workers
// train equal shares); a resumed run appends again from its --load-epoch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dtrain::metrics {

struct EpochFigures {
  int64_t epoch = 0;
  int64_t samples = 0;
  double time_cost_s = 0;
  double samples_per_sec = 0;
  double train_loss = 0;
  double train_accuracy = 0;
  double validation_accuracy = 0;
  int64_t workers = 1;
  int64_t unix_time = 0;
};

// The header line, without '\n'.
const char* EpochFiguresHeader();
std::string MetricsCsvPath(const std::string& prefix);

// Appends one row (and the header first when the file is new or empty), as one write.
absl::Status AppendEpochFigures(const std::string& path, const EpochFigures& row);

// Every row, then for each epoch only the last one written (a resumed run redoes
// epochs), sorted by epoch. NOT_FOUND when the file is missing; INVALID_ARGUMENT
// naming the line for a wrong header or a malformed row.
absl::StatusOr<std::vector<EpochFigures>> ReadEpochFigures(const std::string& path);

}  // namespace dtrain::metrics
