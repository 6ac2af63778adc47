#include "services/server/ps_service.h"

#include <utility>
#include <vector>

#include "common/grpc_util.h"
#include "common/log.h"
#include "services/server/push_pull_reactor.h"

namespace dtrain::server {
namespace {

// Streams one KeyState per key, snapshotting each key just before it is written so
// the shard is never copied whole.
class GetStateReactor final : public grpc::ServerWriteReactor<v1::KeyState> {
 public:
  // `allowed`: NodeChecks::ForState's answer; a refusal is the stream's only answer, as
  // is the handler's refusal of the keys asked for. `control` must outlive the stream.
  GetStateReactor(const ControlHandler* control, const v1::GetStateRequest& req, const absl::Status& allowed)
      : control_(control) {
    absl::StatusOr<std::vector<uint64_t>> keys = allowed.ok() ? control_->StateKeys(req) : allowed;
    if (!keys.ok()) {
      Finish(ToGrpc(keys.status()));
      return;
    }
    keys_ = *std::move(keys);
    Next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "GetState stream broke"));
      return;
    }
    Next();
  }

  void OnDone() override { delete this; }

 private:
  void Next() {
    if (next_ == keys_.size()) {
      Finish(grpc::Status::OK);
      return;
    }
    absl::Status s = control_->KeyStateOf(keys_[next_++], &msg_);
    if (!s.ok()) {
      Finish(ToGrpc(s));
      return;
    }
    StartWrite(&msg_);
  }

  const ControlHandler* control_;
  std::vector<uint64_t> keys_;
  size_t next_ = 0;
  v1::KeyState msg_;
};

}  // namespace

PsService::PsService(kv::ShardStore* store, PsServiceOptions options)
    : store_(store),
      options_(options),
      checks_(options.node_tokens, options.token_key_wait, store),
      control_(store, ControlOptions{options.allow_non_finite, options.catch_up, options.membership}),
      timer_([this] { TimerLoop(); }) {}

PsService::~PsService() {
  {
    absl::MutexLock lock(&timer_mu_);
    stopping_ = true;
  }
  timer_.join();
}

void PsService::TimerLoop() {
  absl::MutexLock lock(&timer_mu_);
  while (!timer_mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.check_interval)) {
    timer_mu_.Unlock();
    store_->CheckDeadlines(absl::Now(), options_.still_waiting_every);
    timer_mu_.Lock();
  }
}

grpc::ServerUnaryReactor* PsService::Configure(grpc::CallbackServerContext* ctx, const v1::ConfigureRequest* req,
                                               v1::ConfigureResponse* /*resp*/) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status s = checks_.ForSetup(*ctx, "Configure");
  if (s.ok()) s = control_.Configure(*req);
  if (!s.ok()) DTRAIN_LOG(WARNING) << "Configure refused: " << s.message();
  reactor->Finish(ToGrpc(s));
  return reactor;
}

grpc::ServerUnaryReactor* PsService::InitKeys(grpc::CallbackServerContext* ctx, const v1::InitKeysRequest* req,
                                              v1::InitKeysResponse* /*resp*/) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status s = checks_.ForSetup(*ctx, "InitKeys");
  if (s.ok()) s = control_.InitKeys(*req);
  reactor->Finish(ToGrpc(s));
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PsService::PushPull(grpc::CallbackServerContext* ctx) {
  StreamOptions stream;
  // With TLS the stream speaks for the worker whose token opened it, and no other.
  absl::StatusOr<std::optional<auth::TokenClaims>> worker = checks_.ForStream(*ctx);
  if (worker.ok()) {
    stream.bound_worker = *worker;
  } else {
    stream.refused = worker.status();
  }
  stream.sync_timeout = options_.sync_timeout;
  stream.request_limits = options_.request_limits;
  stream.allow_non_finite = options_.allow_non_finite;
  stream.max_pending_requests = options_.max_pending_requests;
  stream.max_queued_bytes = options_.max_queued_bytes;
  stream.metrics = options_.metrics;
  stream.catch_up = options_.catch_up;
  stream.push_gate = options_.membership;
  return new PushPullReactor(store_, stream);
}

grpc::ServerWriteReactor<v1::KeyState>* PsService::GetState(grpc::CallbackServerContext* ctx,
                                                            const v1::GetStateRequest* req) {
  return new GetStateReactor(&control_, *req, checks_.ForState(*ctx));
}

grpc::ServerUnaryReactor* PsService::GetVersions(grpc::CallbackServerContext* ctx, const v1::GetVersionsRequest* req,
                                                 v1::GetVersionsResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status s = checks_.ForVersions(*ctx, req->worker_rank(), req->incarnation());
  if (s.ok()) s = control_.GetVersions(*req, resp);
  reactor->Finish(ToGrpc(s));
  return reactor;
}

}  // namespace dtrain::server
