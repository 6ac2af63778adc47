// What a parameter server does with each request of one worker's PushPull stream,
// without gRPC: the request's checks, the worker's admission (its token's binding, the
// store's fence), a compressed push unpacked, a push refused for NaN or Inf, the
// store's Push, Pull and PullDelta, and each answer's header. A server's stream reactor
// (services/server/push_pull_reactor.h) decodes the bytes, hands each request here,
// and writes the answers this hands to its AnswerSink. The `local` kvstore
// (services/worker/kv/local_kvstore.h) and the pushpull_framing fuzz target drive a
// handler the same way with sinks of their own, so both run the server's request path.
//
// Not thread-safe: one request at a time (a stream reads one at a time). Answers may
// come later from any thread (a parked pull answered by another worker's push).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/auth/node_token.h"
#include "common/defaults.h"
#include "common/kv/compression/gradient_codec.h"
#include "common/kv/push_gate.h"
#include "common/kv/request_checks.h"
#include "common/kv/request_observer.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/parameter_server.pb.h"

namespace dtrain::kv {

// A server that joined a key's replica chain (services/server/replica_catch_up.h).
struct JoinedServer {
  int rank = 0;
  std::string address;
};

// Holds an answer back until it may go out (replication: the server's ReplicaCatchUp
// holds a key's answers until a restarted chain member has the key).
class AnswerGate {
 public:
  virtual ~AnswerGate() = default;
  // Called with `key`'s lock held, as an answer of `key` at `version` is about to go
  // out. Returns false when it may go now, naming in `*joined_now` the servers that
  // joined the key's chain at `version` when that is already known (every answer of
  // that version must say so, not only the held ones: a worker whose pull came after
  // the copy would otherwise leave the newcomer out of its next push); true when it is
  // held: `release` runs later, from any thread, with the servers that joined the
  // key's chain at `version`.
  using Release = std::function<void(const std::vector<JoinedServer>& joined)>;
  virtual bool Hold(uint64_t key, int64_t version, Release release, std::vector<JoinedServer>* joined_now) = 0;
};

// A key is at most a 4 MB chunk (common/kv/placement.h): a stream keeps a buffer
// (the reactor's payload, the handler's unpacked push) that size between requests,
// and lets a larger one go once its request is handled.
inline constexpr size_t kKeepPayloadBytes = 8 << 20;

// An answer's status fields (code, message) from `s`.
void SetStatus(const absl::Status& s, v1::PushPullResponse* resp);

// What one PushPull stream may hold and accept (dtrain-server's flags set them; the
// `local` kvstore lifts the wire's caps).
struct StreamOptions {
  // How long a sync pull waits when the request does not say (timeout_ms 0).
  absl::Duration sync_timeout = absl::Seconds(kDefaultSyncTimeoutSeconds);
  // Caps on each request's payload and timeout (request_checks.h).
  RequestLimits request_limits;
  // Apply pushes holding NaN or Inf instead of refusing them (--allow-non-finite).
  bool allow_non_finite = false;
  // The reactor stops reading (gRPC flow control then stalls the client) while this
  // many of its requests are unanswered or their answers unsent, or while its unsent
  // answers hold max_queued_bytes: a client that asks without reading costs bounded
  // memory. A worker has one request per key of a step in flight.
  int64_t max_pending_requests = 65536;
  int64_t max_queued_bytes = int64_t{256} << 20;
  // Replication: may hold an answer until a restarted chain member holds the key
  // (services/server/replica_catch_up.h). Null: never.
  AnswerGate* catch_up = nullptr;
  // Elastic workers (docs/elastic.md): every push passes it, with the request's
  // membership_generation, before the store; its refusal is the push's answer. Null:
  // none (a job that is not elastic: the generation is ignored). Must outlive every stream.
  PushGate* push_gate = nullptr;
  // Request counts and bytes (null: none); must outlive every stream.
  RequestObserver* metrics = nullptr;
  // With TLS (services/server/node_checks.h): the worker whose token opened the stream;
  // every request must speak for its rank and incarnation. Nullopt: not checked.
  std::optional<auth::TokenClaims> bound_worker;
  // Not OK: the stream was refused when it opened (no or a bad token); its first
  // request is answered with this and the stream ends with it.
  absl::Status refused;
};

// Where one stream's answers go. Thread-safe: answers come from any thread.
class AnswerSink {
 public:
  virtual ~AnswerSink() = default;

  // Queues an answer that is its header alone.
  virtual void Send(const v1::PushPullResponse& resp) = 0;

  // Sends one header with data, once, from any thread, possibly later.
  using DataAnswer = std::function<void(const v1::PushPullResponse& resp)>;
  // Copies the `bytes` bytes at `data` (valid only during this call; weights or a
  // packed change) into what an answer will carry, and returns how to send it.
  virtual DataAnswer Prepare(const char* data, size_t bytes) = 0;
};

class PushPullHandler {
 public:
  using Clock = std::function<absl::Time()>;

  // `store`, `options`' catch_up and metrics, and `sink` must outlive every answer; the
  // pull deadlines are counted from `clock`.
  PushPullHandler(ShardStore* store, const StreamOptions& options, std::shared_ptr<AnswerSink> sink,
                  Clock clock = absl::Now);

  // Handles one decoded request; answers it exactly once through the sink, now or
  // later. `payload` holds its data (`payload_bytes` bytes, -1: none) when
  // `payload_taken`; the codec skips data that came before `op` on the wire, which is
  // refused. Returns the refusal that ends the stream (a replaced incarnation,
  // another job, a token that is not the worker's, or StreamOptions::refused), after
  // answering this request with it; OK otherwise, whatever the answer says.
  absl::Status Handle(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes, bool payload_taken);

  // Tags this stream's parked pulls (ShardStore::DropPulls).
  uint64_t owner() const { return owner_; }

 private:
  absl::Status HandleRequest(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes,
                             bool payload_taken);
  // A push, or a push-pull's push: true when the pull follows (the store took the
  // push of a push-pull); else the request was answered.
  bool Push(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes, bool payload_taken,
            v1::PushPullResponse& resp);
  // The pull of `req` (after its push, if any) for `min_version`.
  void Pull(const v1::PushPullRequest& req, int64_t min_version, v1::PushPullResponse resp);
  // True when the request's worker may use the store; else answers the request and,
  // when nothing the stream sends later can be accepted, sets *refusal.
  bool Admit(const v1::PushPullRequest& req, v1::PushPullResponse& resp, absl::Status* refusal);
  // Refuses a push holding NaN or Inf (unless allowed), naming key, step and rank.
  absl::Status CheckFinite(const v1::PushPullRequest& req, const float* grad, int64_t numel) const;
  // A compressed push (req.compression): checks that its `payload_bytes` are exactly
  // the codec's size for the key's element count (which the store holds) and unpacks
  // them into unpacked_ (*numel floats).
  absl::Status Unpack(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes, int64_t* numel);

  ShardStore* store_;
  const StreamOptions options_;
  RequestObserver* metrics_;
  const std::shared_ptr<AnswerSink> sink_;
  const Clock clock_;
  const uint64_t owner_;
  // A compressed push unpacked; reused between requests, but not kept larger than a
  // key's chunk needs.
  std::vector<float> unpacked_;
  std::unique_ptr<GradientCodec> codec_;  // the last compressed push's, reused while it matches
  CompressionSpec codec_spec_;
};

}  // namespace dtrain::kv
