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
#include "absl/time/time.h"
#include "common/kv/epoch_lr.h"
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
  // An elastic job's --lr-step-epochs (optimizer.lr_steps then empty): the servers find
  // each step's epoch from the membership.
  kv::EpochLrSteps epoch_lr;
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

// Where the last PushPull's time went, in seconds. For a step started with StartStep
// (or BeginStep), wait and pull count only the time the caller was blocked in its
// handle's WaitParam and Wait: what the next forward hid is not there.
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

// A step's push-pull sent and not yet all in: what StartStep and OpenStep::Send return
// (as c10d's ProcessGroup returns a Work, ps-lite's KVWorker a timestamp to Wait on).
// The caller chooses when to wait: at once (PushPull), or parameter by parameter as the
// next forward reaches each layer (--overlap: models::Network::SetParamGate). The
// weights are the same bit for bit either way; only when the caller blocks differs.
//
// Deadlines: the store bounds each answer itself (dist_*: --sync-timeout, waited on
// while a dead worker may still be replaced, --rejoin-timeout) with errors that name the
// key, its server and the workers missing. A `deadline` that passes first fails the step
// DEADLINE_EXCEEDED naming the parameter, the servers whose answers are out and how many
// are; absl::InfiniteFuture() leaves only the store's own bounds.
//
// The store must outlive the handle, and takes no other call until Wait returned
// (DistKVStore refuses SaveStates, Settle, Offer and Send meanwhile). A handle
// destroyed before that waits for its step: no answer may land in the weights after it
// is gone.
class PendingStep {
 public:
  virtual ~PendingStep() = default;
  // Blocks until parameter `param_index`'s weights of the step are all in; the step's
  // error if it failed (then the other parameters' answers were dropped).
  virtual absl::Status WaitParam(size_t param_index, absl::Time deadline) = 0;
  // Blocks until every parameter's weights of the step are in: the step's status, the
  // one PushPull returns (a rollback order's RollbackStatus included). Later calls
  // return the same at once.
  virtual absl::Status Wait(absl::Time deadline) = 0;
  // Whether Wait returns at once: the step is over (its weights all in, or it failed).
  virtual bool done() const = 0;
};

// A step whose gradients are being handed over: what BeginStep returns. Backward offers
// each parameter's gradient as soon as it produced it (--overlap: an autograd hook,
// services/worker/early_pushes.h); a store that pushes early sends it at once, so its
// transfer and the other workers' merge of it run while backward goes on. Send then
// starts the rest of the step. The values pushed are those PushPull pushes, so the
// weights are too, bit for bit. The store must outlive it; one destroyed before Send
// drops what it sent (nothing of it lands in the weights afterwards).
class OpenStep {
 public:
  virtual ~OpenStep() = default;
  // Whether Offer sends anything; a store that does not push early ignores it.
  virtual bool pushes_early() const = 0;
  // Parameter `param_index`'s gradient, which must stay valid until the step's handle's
  // Wait returned. A parameter offered twice is sent once.
  virtual absl::Status Offer(size_t param_index, const float* grad) = 0;
  // After backward: sends the step (grads[i] has params[i].numel floats; what was
  // offered is not sent again) and returns its handle. An error here means nothing of
  // the step is outstanding. Once per OpenStep.
  virtual absl::StatusOr<std::unique_ptr<PendingStep>> Send(const std::vector<const float*>& grads) = 0;
};

// The recovery part of a store whose job survives a dead worker or server
// (docs/recovery.md): KVStore::recovery(), null for a store without it.
class Recovery {
 public:
  virtual ~Recovery() = default;
  // After Init in a process that replaced a dead worker, the step to redo (the weights
  // Init pulled are the ones that step starts from); -1 for a fresh start, which begins
  // at init.start_version.
  virtual int64_t resume_step() const = 0;
  // After a step returned a status IsRollback() recognises, goes back to the servers'
  // snapshot: the weights become exactly those of the order's step, which is returned
  // (the caller resumes its data order there).
  virtual absl::StatusOr<int64_t> Rollback() = 0;
};

// The elastic part of a store (docs/elastic.md): KVStore::elastic(), null where the
// job's worker set is fixed.
class ElasticPart {
 public:
  virtual ~ElasticPart() = default;
  // The index of the membership generation this worker runs: every push from now on
  // carries it (0 at the start). A step refused "membership changed" is redone tagged
  // with the generation that holds it.
  virtual void SetMembershipGeneration(int generation) = 0;
  virtual int membership_generation() const = 0;
};

class KVStore {
 public:
  virtual ~KVStore() = default;

  virtual KVStoreMode mode() const = 0;

  // Registers the parameters. Rank 0's current weights (and `init.resume`) become the
  // store's initial state; when Init returns OK every worker's weights equal them.
  virtual absl::Status Init(const std::vector<ParamRef>& params, const KVStoreInit& init) = 0;

  // The synchronous step: sends this worker's gradients for `step` (grads[i] has
  // params[i].numel floats) and overwrites the weights with the result: in sync mode the
  // weights after every worker's step-`step` gradient was applied, in async mode the
  // current ones. A store whose steps overlap (BeginStep overridden) implements it as
  // StartStep then the handle's Wait.
  virtual absl::Status PushPull(int64_t step, const std::vector<const float*>& grads) = 0;

  // Opens `step` for gradients handed over one by one (OpenStep). The default pushes
  // nothing early, and its Send runs PushPull and returns a handle already done.
  virtual std::unique_ptr<OpenStep> BeginStep(int64_t step);
  // BeginStep then Send at once: the step sent, its weights awaited through the handle.
  absl::StatusOr<std::unique_ptr<PendingStep>> StartStep(int64_t step, const std::vector<const float*>& grads);

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

  // Rejoin and rollback (Recovery); null where the store has neither.
  virtual Recovery* recovery() { return nullptr; }
  // Membership generations (ElasticPart); null where the store has none.
  virtual ElasticPart* elastic() { return nullptr; }
};

// A handle whose step is over with `status`: what a synchronous store's steps return.
std::unique_ptr<PendingStep> FinishedStep(absl::Status status);

// The status a step returns when the scheduler ordered a rollback (ABORTED with the
// order's reason, marked so that it is told apart from a failure).
absl::Status RollbackStatus(const std::string& reason);
bool IsRollback(const absl::Status& status);

// The status a step returns when a server refused its push "membership changed from
// step S: ..." (an elastic job committed a generation without this worker's before
// `step`): ABORTED with the server's text, marked, carrying `step`, the step to redo in
// the new generation. membership_status.cc.
absl::Status MembershipChangedStatus(int64_t step, const std::string& reason);
bool IsMembershipChanged(const absl::Status& status);
// The step a MembershipChangedStatus carries; -1 for any other status.
int64_t MembershipChangedStep(const absl::Status& status);

}  // namespace dtrain::worker
