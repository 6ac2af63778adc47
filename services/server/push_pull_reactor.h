// The server side of one worker's PushPull stream (gRPC callback API).
//
// Requests are read continuously and handed to the ShardStore; answers are queued and
// written one at a time. A sync pull may be answered much later, from whichever
// thread runs the push that completes its step, possibly after the client has gone:
// such callbacks hold the shared Outbox, never the reactor itself.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/kv/shard_store.h"
#include "services/server/server_metrics.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"

namespace dtrain::server {

// The stream carries raw buffers (common/kv/tensor_codec.h) so tensors are copied
// once on the way in and once on the way out.
class PushPullReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Deletes itself when the stream is done. `metrics` (null: none) must outlive it.
  PushPullReactor(kv::ShardStore* store, absl::Duration sync_timeout, server::ServerMetrics* metrics);

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
    std::deque<grpc::ByteBuffer> queue ABSL_GUARDED_BY(mu);
    bool writing ABSL_GUARDED_BY(mu) = false;  // exactly one write in flight
    int64_t unanswered ABSL_GUARDED_BY(mu) = 0;  // requests read, answer not yet queued
    bool reads_done ABSL_GUARDED_BY(mu) = false;
    bool broken ABSL_GUARDED_BY(mu) = false;  // cancelled, or a write failed
  };

  void Handle(const v1::PushPullRequest& req, int64_t payload_bytes);
  // Queues an answer, from any thread; starts a write if none is in flight.
  static void Send(const std::shared_ptr<Outbox>& box, grpc::ByteBuffer resp);
  static void Send(const std::shared_ptr<Outbox>& box, const v1::PushPullResponse& resp);
  // Finishes the RPC once nothing more can or need be written.
  void MaybeFinish();

  kv::ShardStore* store_;
  absl::Duration sync_timeout_;
  server::ServerMetrics* metrics_;
  std::shared_ptr<Outbox> box_;
  grpc::ByteBuffer request_;   // the read in flight
  grpc::ByteBuffer writing_;   // the write in flight
  // The pushed gradient of the request being handled; reused, since Handle finishes
  // with it (the store copies what it keeps) before the next read.
  std::vector<float> payload_;
};

}  // namespace dtrain::server
