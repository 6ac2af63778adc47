// Validation: each worker evaluates its part of the test set (EvalPart),
// the parts' counts travel through the scheduler (Cluster::ReportEpoch/GatherEpoch,
// services/worker/epoch_reports.h) and every worker combines them the same way, so the
// accuracy is the whole test set's and identical on every worker, for 1/W of the work.
//
// Read-only for training: no gradient, no weight written, no random number drawn (the
// networks have no dropout), so a run ends with the same weights, bit for bit, however
// it evaluates (the recovery and resume exactness tests rely on it).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/models/models.h"
#include "services/worker/cluster.h"
#include "services/worker/dataset.h"

namespace dtrain::worker {

struct EvalFigures {
  int64_t correct = 0;
  int64_t count = 0;
  double loss_sum = 0;  // summed cross-entropy (nats) over the examples
};

EvalFigures Evaluate(models::Network& net, const TensorSet& set);

struct Validation {
  double accuracy = 0;
  double cross_entropy = 0;
  bool combined = false;  // false: this worker's part only (the gather failed, logged)
};

// Evaluates `part`, reports the epoch's figures (`samples` trained in `train_seconds`)
// and waits up to `timeout` for every worker's, then logs in MXNet's words
//   Epoch[0] Validation-accuracy=0.871200
//   Epoch[0] Validation-cross-entropy=0.352100
// and, on rank 0, one job-wide line
//   Epoch[0] Job: 2 workers\tSpeed: 2468.12 samples/sec\t60000 samples\t10000 test images
// A gather that runs out of time (a worker that never reports) is logged, naming who,
// and this worker's part stands in; only the job's end (ABORTED) is an error.
// `job_line`: rank 0 prints the job-wide line (an elastic job's workers validate on
// their own, and its line comes from the data plan: ElasticEpochLine).
absl::StatusOr<Validation> ValidateEpoch(models::Network& net, const TensorSet& part, Cluster& cluster, int64_t epoch,
                                         int64_t samples, double train_seconds, absl::Duration timeout,
                                         bool job_line = true);

// An elastic job's job-wide epoch line, on the lowest rank of the workers that ran the
// epoch's last step: every example the epoch's steps trained on, whoever took them
//   Epoch[0] Job: 3 workers at its end\tSpeed: 2468.12 samples/sec\t2944 samples\t500 test images
std::string ElasticEpochLine(int64_t epoch, int workers_at_end, int64_t samples, double train_seconds,
                             int64_t test_images);

}  // namespace dtrain::worker
