// The worker's view of parameter synchronisation, one class per kvstore mode (as
// MXNet's KVStore and PyTorch's ProcessGroup backends):
//   local, device          LocalKVStore: one process, optimizer applied in-process
//   dist_sync, dist_device_sync, dist_async
//                          DistKVStore: gradients pushed to parameter servers, which
//                          merge them and apply the optimizer; weights pulled back
// Membership (rank, barriers, leaving) is the Cluster's job (services/worker/cluster.h);
// aggregation over a worker's own devices is the LocalAggregator's (local_aggregator.h).
// No LibTorch here: parameters are plain float buffers owned by the caller.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/checkpoint/checkpoint.h"
#include "common/kv/optimizer.h"
#include "common/kvstore_mode.h"

namespace dtrain::worker {

// One model parameter; `weights` must stay valid for the store's life.
struct ParamRef {
  std::string name;
  std::vector<int64_t> shape;
  float* weights = nullptr;
  int64_t numel = 0;
};

struct KVStoreInit {
  kv::OptimizerOptions optimizer;
  // Resume: each key's update count and optimizer state (from PREFIX-N.states).
  // Null: a fresh start, every key at version `start_version`.
  const checkpoint::OptimizerStates* resume = nullptr;
  int64_t start_version = 0;
};

// Progress and timing, for logs and metrics.
struct KVStoreStats {
  int64_t bytes_pushed = 0;  // on the wire: compressed with --gc-type
  int64_t bytes_pulled = 0;
  // What the pushes were as float32s (bytes_pushed without compression): the ratio of
  // the two is the push's compression ratio.
  int64_t bytes_pushed_uncompressed = 0;
  // What the pulls' answers were as float32 weights (bytes_pulled without
  // --pull-gc-type's packing).
  int64_t bytes_pulled_uncompressed = 0;
};

// Where the last PushPull's time went, in seconds. After StartPushPull, wait and pull
// count only the time the caller was blocked in AwaitParam and FinishPushPull: what the
// next forward hid is not there.
struct PushPullTiming {
  double push = 0;  // building and submitting the requests (copying the gradients)
  double wait = 0;  // until the first answer: in sync mode, mostly the other workers
  double pull = 0;  // from the first answer until every key's weights were written
  // Part of wait + pull spent past the sync timeout because a dead worker could still
  // be replaced (--rejoin-timeout).
  double rejoin_wait = 0;
  // Replication lag: the longest a key's backups answered after its weights were in
  // (< 0: no replication).
  double replica_lag = -1;
};

class KVStore {
 public:
  virtual ~KVStore() = default;

  virtual KVStoreMode mode() const = 0;

  // Registers the parameters. Rank 0's current weights (and `init.resume`) become the
  // store's initial state; when Init returns OK every worker's weights equal them.
  virtual absl::Status Init(const std::vector<ParamRef>& params, const KVStoreInit& init) = 0;

  // Sends this worker's gradients for `step` (grads[i] has params[i].numel floats) and
  // overwrites the weights with the result: in sync mode the weights after every
  // worker's step-`step` gradient was applied, in async mode the current ones.
  virtual absl::Status PushPull(int64_t step, const std::vector<const float*>& grads) = 0;

  // Overlap (--overlap): whether PushEarly sends anything. PushEarly hands parameter
  // `param_index`'s gradient for `step` over as soon as backward produced it, so its
  // transfer (and the other workers' merge of it) runs while backward goes on;
  // PushPull(step, ...) then sends only what was not handed over early, and waits for
  // everything as before. `grad` must stay valid until that PushPull returns. The
  // values pushed are the same, so the weights are too, bit for bit.
  virtual bool PushesEarly() const { return false; }
  virtual absl::Status PushEarly(int64_t /*step*/, size_t /*param_index*/, const float* /*grad*/) {
    return absl::OkStatus();
  }

  // Overlap of the pulls with the next forward (--overlap). StartPushPull
  // sends `step` as PushPull does but returns once everything is submitted: the weights
  // land while the caller goes on with the next batch. AwaitParam(i) blocks until
  // parameter i's weights of that step are all in (the next forward calls it as it
  // reaches each layer, models::Network::SetParamGate), FinishPushPull until every
  // parameter's are. Both return the step's error, the one PushPull would have
  // returned. Until FinishPushPull returns, `grads` must stay valid and nothing but
  // AwaitParam may be called. The weights are those PushPull writes, bit for bit: the
  // only difference is when the caller waits. The default runs PushPull at once.
  virtual bool PullsLazily() const { return false; }
  virtual absl::Status StartPushPull(int64_t step, const std::vector<const float*>& grads) {
    return PushPull(step, grads);
  }
  virtual absl::Status AwaitParam(size_t /*param_index*/) { return absl::OkStatus(); }
  virtual absl::Status FinishPushPull() { return absl::OkStatus(); }

  // The optimizer state of every key, for PREFIX-N.states.
  virtual absl::StatusOr<checkpoint::OptimizerStates> SaveStates() = 0;

  // At the end of an epoch whose last step was `next_step` - 1: makes this worker's
  // weights those of version `next_step` (every worker's pushes of the epoch merged).
  // A no-op where PushPull already returns them; dist_ssp workers may hold weights up
  // to --staleness steps old, so they pull here, and every epoch's checkpoint,
  // validation and the final weights are the same on every worker.
  virtual absl::Status Settle(int64_t /*next_step*/) { return absl::OkStatus(); }

  virtual KVStoreStats stats() const { return {}; }
  virtual PushPullTiming last_timing() const { return {}; }

  // Recovery (docs/recovery.md): after Init in a process that replaced a dead worker,
  // the step to redo (the weights Init pulled are the ones that step starts from);
  // -1 for a fresh start, which begins at init.start_version.
  virtual int64_t resume_step() const { return -1; }

  // After PushPull returned a status IsRollback() recognises, goes back to
  // the servers' snapshot: the weights become exactly those of the order's step,
  // which is returned (the caller resumes its data order there).
  virtual absl::StatusOr<int64_t> Rollback() { return absl::UnimplementedError("this kvstore has no rollback"); }
};

// The status a step returns when the scheduler ordered a rollback (ABORTED with the
// order's reason, marked so that it is told apart from a failure).
absl::Status RollbackStatus(const std::string& reason);
bool IsRollback(const absl::Status& status);

}  // namespace dtrain::worker
