// The server side of one worker's PushPull stream (gRPC callback API): the bytes.
//
// Requests are read continuously, decoded and handed to the stream's PushPullHandler
// (common/kv/push_pull_handler.h: what is done with them); answers are encoded,
// queued and written one at a time. A sync pull may be answered much later, from
// whichever thread runs the push that completes its step, possibly after the client
// has gone: such callbacks hold the shared Outbox, never the reactor itself.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/kv/push_pull_handler.h"
#include "common/kv/request_observer.h"
#include "common/kv/shard_store.h"
#include "services/server/answer_queue.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"

namespace dtrain::server {

// A stream's options, and those PsServiceOptions and dtrain-server's flags default from.
using kv::StreamOptions;

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
  struct Outbox final : kv::AnswerSink, std::enable_shared_from_this<Outbox> {
    void Send(const v1::PushPullResponse& resp) override;
    DataAnswer Prepare(const char* data, size_t bytes) override;

    absl::Mutex mu;
    bool alive ABSL_GUARDED_BY(mu) = true;         // false once Finish is called: answers are dropped
    PushPullReactor* reactor ABSL_GUARDED_BY(mu);  // valid while `alive`
    AnswerQueue queue ABSL_GUARDED_BY(mu);         // lowest key first (answer_queue.h)
    bool writing ABSL_GUARDED_BY(mu) = false;      // exactly one write in flight
    int64_t unanswered ABSL_GUARDED_BY(mu) = 0;    // requests read, answer not yet queued
    bool reads_done ABSL_GUARDED_BY(mu) = false;
    bool broken ABSL_GUARDED_BY(mu) = false;       // cancelled, or a write failed
    int64_t queued_bytes ABSL_GUARDED_BY(mu) = 0;  // in `queue`
    bool read_paused ABSL_GUARDED_BY(mu) = false;  // no read in flight: too much pending
    bool batches ABSL_GUARDED_BY(mu) = false;      // the worker reads batches (batch_answers)
    // The next write: the first queued answer, with those queued behind it as one batch
    // (common/kv/message_batch.h) when the worker reads batches. Not empty `queue` required.
    grpc::ByteBuffer TakeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Set when the stream is refused for good (a fenced incarnation, another job): it
    // reads no more and finishes with this status once its answers are out.
    absl::Status refused ABSL_GUARDED_BY(mu);
  };

  // Queues an answer about `key`, from any thread; starts a write if none is in flight.
  static void Send(const std::shared_ptr<Outbox>& box, uint64_t key, grpc::ByteBuffer resp);
  static void Send(const std::shared_ptr<Outbox>& box, const v1::PushPullResponse& resp);
  // Handles the requests read but not yet handled (a batch's parts) while the stream is
  // not Full, then reads on; pauses reading when Full (OnWriteDone resumes here).
  void HandleUnread();
  // Decodes and handles one request (answering a malformed one if it has an id). False
  // when the stream was refused for good: it is finishing, and nothing more may be read.
  bool HandleRequest(grpc::ByteBuffer& message);
  // Finishes the RPC once nothing more can or need be written.
  void MaybeFinish();
  // Whether the stream holds as much as StreamOptions allows.
  bool Full() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(box_->mu);
  // Starts the next read, or pauses reading while the stream is Full.
  void ReadNext();
  // The stream is gone: fails and forgets the pulls it parked.
  void DropParkedPulls();

  kv::ShardStore* store_;
  const StreamOptions options_;
  kv::RequestObserver* metrics_;
  std::shared_ptr<Outbox> box_;
  kv::PushPullHandler handler_;  // after box_, its sink
  grpc::ByteBuffer request_;     // the read in flight
  // Read, not yet handled: a batch's parts beyond what the stream could take. Touched only
  // by OnReadDone and a resuming OnWriteDone, never both at once (reading is paused while
  // it holds anything).
  std::deque<grpc::ByteBuffer> unread_;
  grpc::ByteBuffer writing_;  // the write in flight
  // The pushed gradient of the request being handled; reused, since the handler
  // finishes with it (the store copies what it keeps) before the next read, but not
  // kept larger than kv::kKeepPayloadBytes between requests.
  std::vector<float> payload_;
  int64_t payload_taken_ = -1;  // bytes of the current request's data in payload_ (-1: none)
};

}  // namespace dtrain::server
