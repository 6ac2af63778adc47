// The ParameterServer gRPC service: a thin translation of RPCs into the gRPC-free
// handlers over the ShardStore (ControlHandler for the control calls, PushPullReactor's
// kv::PushPullHandler for the stream), plus the caller checks that need the gRPC context
// (callback API, so a parked sync pull costs no thread).
#pragma once

#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/auth/node_auth.h"
#include "common/kv/shard_store.h"
#include "services/server/control_handler.h"
#include "services/server/node_checks.h"
#include "services/server/push_pull_reactor.h"
#include "services/server/replica_catch_up.h"
#include "services/server/server_membership.h"
#include "services/server/server_metrics.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"
#include "common/defaults.h"

namespace dtrain::server {

struct PsServiceOptions {
  // How long a sync pull waits for the other workers' pushes before it fails with
  // DEADLINE_EXCEEDED naming them.
  absl::Duration sync_timeout = absl::Seconds(kDefaultSyncTimeoutSeconds);
  // How often parked pulls are checked against their deadlines.
  absl::Duration check_interval = absl::Seconds(1);
  // How often a stalled step is reported in the log.
  absl::Duration still_waiting_every = absl::Seconds(10);
  // Request counts and bytes (null: none); must outlive the service.
  server::ServerMetrics* metrics = nullptr;
  // What one PushPull request may carry and ask for (common/kv/request_checks.h).
  kv::RequestLimits request_limits;
  // Apply pushes holding NaN or Inf instead of refusing them.
  bool allow_non_finite = false;
  // What one PushPull stream may hold before it stops reading (StreamOptions).
  int64_t max_pending_requests = StreamOptions().max_pending_requests;
  int64_t max_queued_bytes = StreamOptions().max_queued_bytes;
  // Replication: brings restarted chain members back (null: none); must outlive the service.
  ReplicaCatchUp* catch_up = nullptr;
  // With TLS (docs/security.md): the key of the job's node tokens, set once the server
  // registered. Every call must then carry a token: PushPull and GetVersions a worker's
  // for the rank and incarnation it speaks for, Configure and InitKeys worker 0's or a
  // server's (replica catch-up), GetState a worker's or an operator certificate. Null:
  // nothing is checked (plaintext, or a standalone server). Must outlive the service.
  const auth::TokenKeyring* node_tokens = nullptr;
  // How long a call may wait for that key (a worker may hear of this server a moment
  // before the server hears back from the scheduler).
  absl::Duration token_key_wait = absl::Seconds(10);
  // Elastic jobs (docs/elastic.md): every push passes its gate, and Configure takes its
  // worker count (ControlOptions::membership). Null: not elastic. Must outlive the service.
  ServerMembership* membership = nullptr;
};

// PushPull is a raw method: its messages are assembled by common/kv/tensor_codec.h.
using PsServiceBase =
    v1::ParameterServer::WithCallbackMethod_Configure<v1::ParameterServer::WithCallbackMethod_InitKeys<
        v1::ParameterServer::WithRawCallbackMethod_PushPull<v1::ParameterServer::WithCallbackMethod_GetState<
            v1::ParameterServer::WithCallbackMethod_GetVersions<v1::ParameterServer::Service>>>>>;

class PsService final : public PsServiceBase {
 public:
  // `store` must outlive the service. Starts the deadline timer thread.
  PsService(kv::ShardStore* store, PsServiceOptions options);
  ~PsService() override;  // stops the timer

  grpc::ServerUnaryReactor* Configure(grpc::CallbackServerContext* ctx, const v1::ConfigureRequest* req,
                                      v1::ConfigureResponse* resp) override;
  grpc::ServerUnaryReactor* InitKeys(grpc::CallbackServerContext* ctx, const v1::InitKeysRequest* req,
                                     v1::InitKeysResponse* resp) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PushPull(grpc::CallbackServerContext* ctx) override;
  grpc::ServerWriteReactor<v1::KeyState>* GetState(grpc::CallbackServerContext* ctx,
                                                   const v1::GetStateRequest* req) override;
  grpc::ServerUnaryReactor* GetVersions(grpc::CallbackServerContext* ctx, const v1::GetVersionsRequest* req,
                                        v1::GetVersionsResponse* resp) override;

 private:
  void TimerLoop();

  kv::ShardStore* store_;
  PsServiceOptions options_;
  NodeChecks checks_;
  ControlHandler control_;
  absl::Mutex timer_mu_;
  bool stopping_ ABSL_GUARDED_BY(timer_mu_) = false;
  std::thread timer_;
};

}  // namespace dtrain::server
