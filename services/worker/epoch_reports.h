// The workers' epoch figures travel on the heartbeats (EpochReport) and are
// read back from the scheduler's GetStatus: the simplest channel that already reaches
// every worker, has deadlines, and survives a worker's or the scheduler's restart
// (a rank's reports are kept across its incarnations; a restarted scheduler gets each
// worker's newest one with its next heartbeat). No new RPC, no barrier with payloads.
#pragma once

#include <cstdint>
#include <vector>

#include "dtrain/v1/scheduler.pb.h"
#include "services/worker/cluster.h"

namespace dtrain::worker {

v1::EpochReport ToReport(const EpochFigures& f);

// Every worker's report of `epoch` in `status`, by rank 0..num_workers-1, when all are
// there; otherwise false with the ranks still missing in *missing.
bool EpochReportsOf(const v1::GetStatusResponse& status, int num_workers, int64_t epoch, std::vector<EpochFigures>* out,
                    std::vector<int>* missing);

// The job-wide figures of one epoch.
struct CombinedEpoch {
  int workers = 0;
  int64_t samples = 0;
  double samples_per_sec = 0;  // the sum of each worker's own samples / train seconds
  int64_t eval_count = 0;
  double validation_accuracy = 0;       // all correct / all evaluated
  double validation_cross_entropy = 0;  // all losses / all evaluated
};
CombinedEpoch Combine(const std::vector<EpochFigures>& all);

}  // namespace dtrain::worker
