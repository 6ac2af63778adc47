// The rules that keep a checkpoint set to one run, and a resume to the run it resumes.
// No LibTorch: the trainer loads and saves the tensors, these decide whether it may.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
#include "services/worker/train_options.h"

namespace dtrain::worker {

// The record a run with these options and `num_workers` writes into its .states files.
checkpoint::RunRecord RunRecordFor(const TrainOptions& o, int num_workers, std::string run_id);

// Compares the record saved in `states_path` with this run's. FAILED_PRECONDITION naming
// the file and every flag whose saved and requested values differ. A file from before
// run records (`saved` unset) is accepted with a warning: the sync version check still
// catches a different batch size or worker count there, nothing else can be checked.
absl::Status CheckResumeMatches(const std::string& states_path, const std::optional<checkpoint::RunRecord>& saved,
                                const checkpoint::RunRecord& requested);

// Run by the worker that writes the files, before training. Sweeps temp files whose
// writer is gone. Then, so that a set never mixes two runs' epochs (inference serves the
// newest file, whoever wrote it):
//   - a fresh start (load_epoch 0) on a prefix that holds checkpoints, and
//   - a resume from epoch N on a prefix that holds epochs after N
// are FAILED_PRECONDITION naming the files and the ways on (resume, another prefix, or
// --overwrite-checkpoints), unless o.overwrite_checkpoints, which deletes those files.
absl::Status PrepareCheckpointPrefix(const TrainOptions& o);

// A worker 0 that replaced a dead one (docs/recovery.md) continues its run's checkpoint
// set: it only sweeps the temp files its predecessor left.
absl::Status SweepCheckpointTemps(const TrainOptions& o);

// The run id in the symbol file a dead worker 0 of this job wrote, so that its
// replacement's later checkpoints carry the same; `fallback` when there is none (it
// died before writing it).
std::string RunIdOfPredecessor(const TrainOptions& o, const std::string& fallback);

}  // namespace dtrain::worker
