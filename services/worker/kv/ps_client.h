// A worker's connection to one parameter server: unary Configure/InitKeys/GetState,
// and one long-lived PushPull stream on which requests are pipelined.
//
// Like ps-lite's KVWorker, Push/Pull return at once with a ticket and Wait(ticket)
// blocks; unlike it, every wait has a deadline and names what it waited for.
// A reader thread matches responses to tickets by request_id and writes pulled
// weights straight into the caller's buffer.
//
// Push/Pull/PushPull may be called from one thread at a time; Wait from any.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/optimizer.h"
#include "common/kv/key_state.h"
#include "common/kvstore_mode.h"

namespace dtrain::worker {

class PsClient {
 public:
  using Ticket = uint64_t;

  // Opens the channel and the PushPull stream. UNAVAILABLE (naming the address) when
  // the server cannot be reached within `connect_timeout`. A zero timeout does not
  // wait (a server known dead): if it cannot be reached, the stream and every call
  // fail UNAVAILABLE, as for a server that died later.
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const std::string& address, int server_rank, int worker_rank,
                                                           absl::Duration connect_timeout);
  ~PsClient();  // closes the stream; pending tickets fail with CANCELLED

  // `mode`: one of the dist_* modes; `staleness` for dist_ssp (0 otherwise);
  // `pull_compression` (--pull-gc-type; dist_sync only) packs each step's weight change.
  absl::Status Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                         absl::Duration timeout, int staleness = 0,
                         kv::CompressionType pull_compression = kv::CompressionType::kNone);
  // Pull compression the servers were configured with: push-pulls asked for with
  // pull_delta may then be answered with the packed change. Call before the first one.
  void SetPullCompression(kv::CompressionType type);
  // Sends keys in requests of at most a few MB each. `chains` (empty, or one per key):
  // each key's replica chain, which its servers keep to bring a restarted member back.
  absl::Status InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                        const std::vector<std::vector<int>>& chains = {});

  // Replication: a server of a key's chain that restarted and now holds the key from
  // `version` on (a PushPull answer said so; replica_catch_up.h on the server).
  struct JoinNotice {
    uint64_t key = 0;
    int64_t version = 0;
    int server = 0;
    std::string address;
  };
  // The notices received since the last call.
  std::vector<JoinNotice> TakeJoinNotices();
  absl::StatusOr<std::vector<kv::KeyState>> GetState(const std::vector<uint64_t>& keys, absl::Duration timeout);

  // Recovery (docs/recovery.md): the job id and this process's incarnation of its rank
  // (from the scheduler's RegisterResponse), sent on every later request. Call before
  // the first Push/Pull, from the thread that sends them. Unset ("" / 0): not sent,
  // and the server does not fence this client.
  void SetIdentity(const std::string& job_id, uint64_t incarnation);
  // Each key's version on this server and this worker's last push step of it that the
  // server accepted (-1: none); every key held when `keys` is empty. A rejoining worker
  // asks this to find the step to redo; it also fences the incarnation it replaces.
  // FAILED_PRECONDITION when this process is itself fenced or of another job.
  absl::StatusOr<std::vector<kv::KeyVersion>> GetVersions(const std::vector<uint64_t>& keys, absl::Duration timeout);

  // A push's data as it goes on the wire: the key's `numel` float32s, or those packed
  // by a GradientCodec (common/kv/compression) into `size` bytes, which the
  // server unpacks. Either is sent from where it lies, like `grad` below.
  struct PushData {
    const char* bytes = nullptr;
    int64_t size = 0;   // bytes at `bytes`
    int64_t numel = 0;  // the key's element count: numel * 4 bytes uncompressed
    kv::CompressionSpec compression{kv::CompressionType::kNone, 0.0f};

    static PushData Floats(const float* grad, int64_t numel) {
      return {reinterpret_cast<const char*>(grad), numel * static_cast<int64_t>(sizeof(float)), numel};
    }
  };

  // `grad` is sent from where it lies, without a copy: it must stay valid and
  // unchanged until Wait(ticket) returns (or the client is destroyed).
  Ticket Push(int64_t step, uint64_t key, const float* grad, int64_t numel);
  Ticket Push(int64_t step, uint64_t key, const PushData& data);
  // `out` (numel floats) is written before Wait(ticket) returns OK; it must stay valid
  // until then. Its version lands in *version when non-null.
  Ticket Pull(uint64_t key, int64_t min_version, float* out, int64_t numel, int64_t* version = nullptr);
  // As Pull, for the weights of exactly `version` (PushPullRequest.exact_version): a
  // rejoining worker redoing step `version` where some keys already merged it. The
  // server answers the key's current version or, in dist_sync, the previous one it
  // keeps; a version ahead waits as a pull does; an older one, or a dist_async server,
  // fails FAILED_PRECONDITION. A server older than the field answers as for Pull, so
  // check *version_out (the version of what was written into `out`).
  Ticket PullExact(uint64_t key, int64_t version, float* out, int64_t numel, int64_t* version_out = nullptr);
  // Push, then pull the weights after this step's update (sync) or at once (async).
  Ticket PushPull(int64_t step, uint64_t key, const float* grad, float* out, int64_t numel);
  // As PushPull, with `data` (possibly compressed) as the push; `out` has data.numel floats.
  // `pull_delta` (with SetPullCompression): `out` holds this key's weights of version
  // `step` exactly as the server had them, so the server may answer with the packed
  // change to step + 1, which is unpacked and added to `out` (PushPullRequest.pull_delta).
  Ticket PushPull(int64_t step, uint64_t key, const PushData& data, float* out, bool pull_delta = false);
  // Replication: as PushPull and Pull, but the server answers with the version only
  // (PushPullRequest.version_only), written to *version when non-null. A worker asks
  // every replica of a key but takes the weights from one; these answers confirm that
  // the others reached the step too.
  Ticket PushPullVersionOnly(int64_t step, uint64_t key, const float* grad, int64_t numel, int64_t* version = nullptr);
  Ticket PushPullVersionOnly(int64_t step, uint64_t key, const PushData& data, int64_t* version = nullptr);
  Ticket PullVersionOnly(uint64_t key, int64_t min_version, int64_t* version = nullptr);

  // Pulls and push-pulls sent after this carry it as timeout_ms: a sync pull parked
  // longer is answered DEADLINE_EXCEEDED by the server, naming the workers whose
  // pushes are missing (which only the server knows). Set it a little below the
  // deadline given to Wait so that answer arrives first. Zero (the default): the
  // server's --sync-timeout.
  void SetPullTimeout(absl::Duration timeout);

  // The ticket's outcome: the server's error, UNAVAILABLE if the stream broke, or
  // DEADLINE_EXCEEDED ("server 1 at 127.0.0.1:4000: no answer to pull of key 3
  // within 120 s"). A ticket may be waited for once.
  absl::Status Wait(Ticket ticket, absl::Time deadline);
  // Blocks until the ticket has its answer (true) or `until` passes (false), without
  // collecting it: a long wait is cut into slices between which the caller checks the
  // job (a peer's death, the scheduler ending it). Unknown tickets: true.
  bool WaitUntil(Ticket ticket, absl::Time until);
  // Waits for every outstanding ticket; returns the first error.
  absl::Status WaitAll(absl::Time deadline);

  const std::string& address() const;
  int server_rank() const;
  // Bytes of payload sent and received on the stream so far (pushes as sent, so
  // compressed ones count their packed size).
  int64_t bytes_pushed() const;
  // What the pushes sent so far are as float32s: bytes_pushed() without compression.
  int64_t bytes_pushed_uncompressed() const;
  int64_t bytes_pulled() const;
  // What the answers pulled so far are as float32 weights: bytes_pulled() without pull
  // compression.
  int64_t bytes_pulled_uncompressed() const;

 private:
  struct Impl;
  explicit PsClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain::worker
