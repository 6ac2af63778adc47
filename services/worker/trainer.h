// The training loop of one worker: data, model, kvstore, progress lines, validation
// and checkpoints. Membership is behind Cluster, synchronisation behind KVStore.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "services/worker/cluster.h"
#include "services/worker/gpu_devices.h"
#include "services/worker/kv/kvstore.h"
#include "services/worker/train_options.h"

namespace dtrain::worker {

class WorkerMetrics;

struct TrainResult {
  int64_t samples = 0;       // trained by this worker (resumed epochs excluded)
  double train_seconds = 0;  // training only: no validation, no checkpoints
  double validation_accuracy = 0;
  uint64_t weights_fnv = 0;  // FNV-1a 64 of the final weights' bytes
  // An elastic job's worker that left it (SIGTERM, then a generation without it from
  // this step): >= 0, and the figures above are not the job's. -1: trained to the end.
  int64_t left_at_step = -1;
};

// Runs epochs load_epoch .. num_epochs-1 and logs MXNet-style lines:
//   Epoch[0] Batch [100]	Speed: 1234.56 samples/sec	Train-accuracy=0.812500	Train-cross-entropy=0.52
//     	batch 100/468	eta 0:21 (epoch), 2:05 (run)
//   Update[469]: Change learning rate to 5.00000e-03        (trainer_lr_log.h)
//   Epoch[0] Train-accuracy=0.85   Epoch[0] Train-cross-entropy=0.41   Epoch[0] Time cost=12.345
//   Epoch[0] Validation-accuracy=0.87   Epoch[0] Validation-cross-entropy=0.35   (over every worker's part)
//   Epoch[0] Job: 2 workers	Speed: 2468.12 samples/sec	...   (rank 0; trainer_eval.h)
// Rank 0 writes PREFIX-symbol.json once and PREFIX-NNNN.params/.states each epoch, and
// appends the epoch's figures to PREFIX-metrics.csv. `metrics` (null: off) gets every
// step's figures and timing. `devices` (PrepareDevices; empty: none) get one model replica
// each, which compute every step's gradients for the host model (trainer_replicas.h).
absl::StatusOr<TrainResult> Train(const TrainOptions& options, Cluster& cluster, KVStore& kvstore,
                                  WorkerMetrics* metrics = nullptr, WorkerDevices devices = {});

}  // namespace dtrain::worker
