// The worker's channel to one parameter server, as DistKVStore sees it: one kind of
// request (KeyRequest) submitted for a ticket, waits with deadlines, and the unary calls
// that set a server up and read it back. PsClient (ps_client.h) implements it over gRPC;
// tests implement it in-process over a kv::ShardStore (tests/unit/worker/kv/support),
// so that the kvstore's step pipeline, failover and recovery run without sockets.
//
// Like ps-lite's KVWorker over its Van: Submit returns at once and Wait blocks; unlike
// it, every wait has a deadline and its error names what was waited for.
//
// Contract every implementation keeps (the kvstore relies on each point):
// - Submit never blocks on the server. A request sent after the channel broke, or one
//   that does not make sense (ValidateKeyRequest), gets a ticket whose Wait returns
//   that error.
// - A pull (or the pull of a push-pull) of a dist_sync key is answered once the key's
//   version reaches the one asked for: after every worker's push of the step merged.
//   A parked pull is answered DEADLINE_EXCEEDED by the server after the pull timeout
//   (SetPullTimeout; zero: the server's own), naming the workers whose pushes are
//   missing, which only the server knows.
// - Requests of one key are handled in the order submitted.
// - `out` is written (weights, or for Target::kDelta the held weights plus the unpacked
//   change) before Wait returns OK, and never after Wait returned, whatever the outcome.
//   A push's bytes are read until Wait returns, not after.
// - A broken channel (the server died) fails every outstanding and later ticket
//   UNAVAILABLE; a server that refused this process (fenced, another job) fails them
//   FAILED_PRECONDITION.
// - Deadlines are in the time of the clock the channel was made with (absl::Now for
//   PsClient; an in-process channel may be given another, as DistKVStore may).
//
// Submit may be called from one thread at a time; Wait and WaitUntil from any.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/kv/epoch_lr.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/key_state.h"
#include "common/kv/optimizer.h"
#include "common/kvstore_mode.h"

namespace dtrain::worker {

// A push's data as it goes to the server: the key's `numel` float32s, or those packed
// by a GradientCodec (common/kv/compression) into `size` bytes, which the server
// unpacks. It is sent from where it lies, without a copy.
struct PushData {
  const char* bytes = nullptr;
  int64_t size = 0;   // bytes at `bytes`
  int64_t numel = 0;  // the key's element count: numel * 4 bytes uncompressed
  kv::CompressionSpec compression{kv::CompressionType::kNone, 0.0f};

  static PushData Floats(const float* grad, int64_t numel) {
    return {reinterpret_cast<const char*>(grad), numel * static_cast<int64_t>(sizeof(float)), numel};
  }
};

// One request about one key: a push, a pull, or both (the push, then the pull of the
// weights after the pushed step: PullVersionAfterPush's version, which the server
// knows). The builders below are the requests the kvstore sends.
struct KeyRequest {
  enum class Op { kPush, kPull, kPushPull };
  // What the answer carries.
  enum class Target {
    kNone,         // nothing: a push's acknowledgement
    kWeights,      // `numel` floats into `out`
    kVersionOnly,  // the version only (replication: a replica that confirms the step)
    // A pull of exactly version `step_or_version` (a rejoining worker redoing that
    // step): the key's current version or, in dist_sync, the previous one the server
    // keeps; one ahead waits as a pull does; an older one, or a dist_async server, fails
    // FAILED_PRECONDITION. A server without exact pulls answers as for kWeights, so
    // check *version_out.
    kExact,
    // A push-pull whose `out` holds the key's weights of version `step_or_version`
    // exactly as the server had them: the answer may be the packed change to the next
    // version (with SetPullCompression), unpacked and added to `out`; else the weights.
    kDelta,
  };

  Op op = Op::kPull;
  uint64_t key = 0;
  // Push, push-pull: the step pushed (the version of the weights the gradient was
  // computed on). Pull: the version wanted (at least, or exactly for kExact).
  int64_t step_or_version = 0;
  PushData payload;  // push, push-pull
  Target target = Target::kNone;
  float* out = nullptr;            // kWeights, kExact, kDelta: numel floats
  int64_t numel = 0;               // of `out`; a push-pull's is payload.numel
  int64_t* version_out = nullptr;  // when non-null: the answer's version
  // Push, push-pull of an elastic job: the index of the membership generation the
  // worker runs (PushPullRequest.membership_generation); 0 otherwise.
  int membership_generation = 0;
  // Push, push-pull of dist_ssp: how many versions older than the step the weights the
  // gradient was computed on are (PushPullRequest.lag); 0: fresh.
  int64_t lag = 0;

  static KeyRequest Push(int64_t step, uint64_t key, const PushData& data);
  static KeyRequest Push(int64_t step, uint64_t key, const float* grad, int64_t numel);
  static KeyRequest Pull(uint64_t key, int64_t min_version, float* out, int64_t numel, int64_t* version = nullptr);
  static KeyRequest PullExact(uint64_t key, int64_t version, float* out, int64_t numel, int64_t* version_out = nullptr);
  static KeyRequest PullVersionOnly(uint64_t key, int64_t min_version, int64_t* version = nullptr);
  // `pull_delta`: Target::kDelta, else kWeights.
  static KeyRequest PushPull(int64_t step, uint64_t key, const PushData& data, float* out, bool pull_delta = false);
  static KeyRequest PushPull(int64_t step, uint64_t key, const float* grad, float* out, int64_t numel);
  static KeyRequest PushPullVersionOnly(int64_t step, uint64_t key, const PushData& data, int64_t* version = nullptr);
  static KeyRequest PushPullVersionOnly(int64_t step, uint64_t key, const float* grad, int64_t numel,
                                        int64_t* version = nullptr);
};

// INVALID_ARGUMENT naming what is wrong when `request`'s op and target do not go
// together (a push answers kNone; a pull kWeights, kVersionOnly or kExact; a push-pull
// kWeights, kVersionOnly or kDelta), or an `out` is missing or of another size than the
// push-pull's payload.
absl::Status ValidateKeyRequest(const KeyRequest& request);
// "push", "pull", "push-pull".
const char* OpName(KeyRequest::Op op);

class ServerChannel {
 public:
  using Ticket = uint64_t;
  // Replication: a server of a key's chain that restarted and now holds the key from
  // `version` on (a push-pull's answer said so; replica_catch_up.h on the server).
  struct JoinNotice {
    uint64_t key = 0;
    int64_t version = 0;
    int server = 0;
    std::string address;
  };

  virtual ~ServerChannel() = default;

  // The step pipeline.
  virtual Ticket Submit(const KeyRequest& request) = 0;
  // The ticket's outcome: the server's error, UNAVAILABLE if the channel broke, or
  // DEADLINE_EXCEEDED ("server 1 at 127.0.0.1:4000: no answer to pull of key 3 within
  // 120 s"). A ticket may be waited for once; INVALID_ARGUMENT for another.
  virtual absl::Status Wait(Ticket ticket, absl::Time deadline) = 0;
  // Blocks until the ticket has its answer (true) or `until` passes (false), without
  // collecting it: a long wait is cut into slices between which the caller checks the
  // job (a peer's death, the scheduler ending it). Unknown tickets: true.
  virtual bool WaitUntil(Ticket ticket, absl::Time until) = 0;
  // Waits for every outstanding ticket; returns the first error.
  virtual absl::Status WaitAll(absl::Time deadline) = 0;
  // The join notices received since the last call.
  virtual std::vector<JoinNotice> TakeJoinNotices() = 0;

  // Unary calls. `mode`: one of the dist_* modes; `staleness` for dist_ssp (0
  // otherwise); `pull_compression` (--pull-gc-type; dist_sync only) packs each step's
  // weight change.
  // `epoch_lr`: an elastic job's --lr-step-epochs (ConfigureRequest.epoch_lr).
  virtual absl::Status Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                                 absl::Duration timeout, int staleness = 0,
                                 kv::CompressionType pull_compression = kv::CompressionType::kNone,
                                 const kv::EpochLrSteps& epoch_lr = {}) = 0;
  // `chains` (empty, or one per key): each key's replica chain, which its servers keep
  // to bring a restarted member back.
  virtual absl::Status InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                                const std::vector<std::vector<int>>& chains = {}) = 0;
  // The keys' state (every key held when `keys` is empty).
  virtual absl::StatusOr<std::vector<kv::KeyState>> GetState(const std::vector<uint64_t>& keys,
                                                             absl::Duration timeout) = 0;
  // Each key's version on this server and this worker's last push step of it that the
  // server accepted (-1: none); every key held when `keys` is empty. A rejoining worker
  // asks this to find the step to redo; it also fences the incarnation it replaces.
  // FAILED_PRECONDITION when this process is itself fenced or of another job.
  virtual absl::StatusOr<std::vector<kv::KeyVersion>> GetVersions(const std::vector<uint64_t>& keys,
                                                                  absl::Duration timeout) = 0;

  // Settings, before the first Submit, from the thread that submits.
  // Pull compression the servers were configured with: push-pulls of Target::kDelta
  // may then be answered with the packed change.
  virtual void SetPullCompression(kv::CompressionType type) = 0;
  // Pulls and push-pulls submitted after this carry it: a sync pull parked longer is
  // answered DEADLINE_EXCEEDED by the server. Set it a little below the deadline given
  // to Wait so that the server's answer arrives first. Zero: the server's own.
  virtual void SetPullTimeout(absl::Duration timeout) = 0;
  // Recovery (docs/recovery.md): the job id and this process's incarnation of its rank,
  // sent with every later request. Unset ("" / 0): not sent, and the server does not
  // fence this worker.
  virtual void SetIdentity(const std::string& job_id, uint64_t incarnation) = 0;

  virtual const std::string& address() const = 0;
  virtual int server_rank() const = 0;
  // Bytes of payload sent and received so far (pushes as sent, so compressed ones count
  // their packed size), and what they are as float32s.
  virtual int64_t bytes_pushed() const = 0;
  virtual int64_t bytes_pushed_uncompressed() const = 0;
  virtual int64_t bytes_pulled() const = 0;
  virtual int64_t bytes_pulled_uncompressed() const = 0;
};

}  // namespace dtrain::worker
