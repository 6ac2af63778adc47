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

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"

namespace dtrain::server {

class PushPullReactor final : public grpc::ServerBidiReactor<v1::PushPullRequest, v1::PushPullResponse> {
 public:
  // Deletes itself when the stream is done.
  PushPullReactor(kv::ShardStore* store, absl::Duration sync_timeout);

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
    std::deque<v1::PushPullResponse> queue ABSL_GUARDED_BY(mu);
    bool writing ABSL_GUARDED_BY(mu) = false;  // exactly one write in flight
    int64_t unanswered ABSL_GUARDED_BY(mu) = 0;  // requests read, answer not yet queued
    bool reads_done ABSL_GUARDED_BY(mu) = false;
    bool broken ABSL_GUARDED_BY(mu) = false;  // cancelled, or a write failed
  };

  void Handle(const v1::PushPullRequest& req);
  // Queues an answer, from any thread; starts a write if none is in flight.
  static void Send(const std::shared_ptr<Outbox>& box, v1::PushPullResponse resp);
  // Finishes the RPC once nothing more can or need be written.
  void MaybeFinish();

  kv::ShardStore* store_;
  absl::Duration sync_timeout_;
  std::shared_ptr<Outbox> box_;
  v1::PushPullRequest request_;   // the read in flight
  v1::PushPullResponse writing_;  // the write in flight
};

}  // namespace dtrain::server
