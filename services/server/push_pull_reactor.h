// The server side of one worker's PushPull stream (gRPC callback API).
//
// Requests are read continuously and handed to the ShardStore; answers are queued and
// written one at a time. A sync pull may be answered much later, from whichever
// thread runs the push that completes its step, possibly after the client has gone:
// such callbacks hold the shared Outbox, never the reactor itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/shard_store.h"
#include "common/auth/node_token.h"
#include "services/server/answer_queue.h"
#include "services/server/request_checks.h"
#include "services/server/server_metrics.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"

namespace dtrain::server {

// What one PushPull stream may hold and accept (dtrain-server's flags set them).
class ReplicaCatchUp;

// The longest replica chain a request may name (KeyInit.chain, joined servers).
inline constexpr int kMaxChainLength = 64;

struct StreamOptions {
  // How long a sync pull waits when the request does not say (timeout_ms 0).
  absl::Duration sync_timeout = absl::Seconds(120);
  // Caps on each request's payload and timeout (request_checks.h).
  RequestLimits request_limits;
  // Apply pushes holding NaN or Inf instead of refusing them (--allow-non-finite).
  bool allow_non_finite = false;
  // The stream stops reading (gRPC flow control then stalls the client) while this
  // many of its requests are unanswered or their answers unsent, or while its unsent
  // answers hold max_queued_bytes: a client that asks without reading costs bounded
  // memory. A worker has one request per key of a step in flight.
  int64_t max_pending_requests = 65536;
  int64_t max_queued_bytes = int64_t{256} << 20;
  // Replication: may hold an answer until a restarted chain member holds the key
  // (replica_catch_up.h). Null: never.
  ReplicaCatchUp* catch_up = nullptr;
  // Request counts and bytes (null: none); must outlive every stream.
  server::ServerMetrics* metrics = nullptr;
  // With TLS (node_checks.h): the worker whose token opened the stream; every request
  // must speak for its rank and incarnation. Nullopt: not checked.
  std::optional<auth::TokenClaims> bound_worker;
  // Not OK: the stream was refused when it opened (no or a bad token); its first
  // request is answered with this and the stream ends with it.
  absl::Status refused;
};

// The stream carries raw buffers (common/kv/tensor_codec.h) so tensors are copied
// once on the way in and once on the way out.
class PushPullReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Deletes itself when the stream is done.
  PushPullReactor(kv::ShardStore* store, const StreamOptions& options);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // What answers need, shared with parked pulls; outlives the reactor if it must.
  struct Outbox {
    absl::Mutex mu;
    bool alive ABSL_GUARDED_BY(mu) = true;  // false once Finish is called: answers are dropped
    PushPullReactor* reactor ABSL_GUARDED_BY(mu);  // valid while `alive`
    AnswerQueue queue ABSL_GUARDED_BY(mu);  // lowest key first (answer_queue.h)
    bool writing ABSL_GUARDED_BY(mu) = false;  // exactly one write in flight
    int64_t unanswered ABSL_GUARDED_BY(mu) = 0;  // requests read, answer not yet queued
    bool reads_done ABSL_GUARDED_BY(mu) = false;
    bool broken ABSL_GUARDED_BY(mu) = false;  // cancelled, or a write failed
    int64_t queued_bytes ABSL_GUARDED_BY(mu) = 0;  // in `queue`
    bool read_paused ABSL_GUARDED_BY(mu) = false;  // no read in flight: too much pending
    // Set when the stream is refused for good (a fenced incarnation, another job): it
    // reads no more and finishes with this status once its answers are out.
    absl::Status refused ABSL_GUARDED_BY(mu);
  };

  void Handle(const v1::PushPullRequest& req, int64_t payload_bytes);
  // Whether the request's job id and incarnation may use the store; if not, answers it
  // and marks the stream refused (docs/recovery.md: a fenced process is cut off).
  bool Admit(const v1::PushPullRequest& req, v1::PushPullResponse& resp);
  // Queues an answer about `key`, from any thread; starts a write if none is in flight.
  static void Send(const std::shared_ptr<Outbox>& box, uint64_t key, grpc::ByteBuffer resp);
  static void Send(const std::shared_ptr<Outbox>& box, const v1::PushPullResponse& resp);
  // Finishes the RPC once nothing more can or need be written.
  void MaybeFinish();
  // Whether the stream holds as much as StreamOptions allows.
  bool Full() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(box_->mu);
  // Starts the next read, or pauses reading while the stream is Full.
  void ReadNext();
  // The stream is gone: fails and forgets the pulls it parked.
  void DropParkedPulls();
  // Refuses a push holding NaN or Inf (unless allowed), naming key, step and rank.
  absl::Status CheckFinite(const v1::PushPullRequest& req, const float* grad, int64_t numel) const;
  // A compressed push (req.compression): checks that its `payload_bytes` in payload_
  // are exactly the codec's size for the key's element count (which the store holds)
  // and unpacks them into unpacked_ (*numel floats).
  absl::Status Unpack(const v1::PushPullRequest& req, int64_t payload_bytes, int64_t* numel);

  kv::ShardStore* store_;
  const StreamOptions options_;
  server::ServerMetrics* metrics_;
  const uint64_t owner_;  // tags this stream's parked pulls (ShardStore::DropPulls)
  std::shared_ptr<Outbox> box_;
  grpc::ByteBuffer request_;   // the read in flight
  grpc::ByteBuffer writing_;   // the write in flight
  // The pushed gradient of the request being handled; reused, since Handle finishes
  // with it (the store copies what it keeps) before the next read, but not kept
  // larger than kKeepPayloadBytes between requests.
  std::vector<float> payload_;
  int64_t payload_taken_ = -1;  // bytes of the current request's data in payload_ (-1: none)
  // A compressed push unpacked (payload_ then holds the packed bytes); same keep rule.
  std::vector<float> unpacked_;
  std::unique_ptr<kv::GradientCodec> codec_;  // the last compressed push's, reused while it matches
  kv::CompressionSpec codec_spec_;
};

}  // namespace dtrain::server
