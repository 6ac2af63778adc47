#include "tests/integration/security/node_attacks.h"

#include <cmath>

#include "common/auth/node_token.h"
#include "common/grpc_util.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"
#include "dtrain/v1/scheduler.grpc.pb.h"
#include "tests/integration/security/tls_peer.h"

namespace dtrain::testing {
namespace {

void Prepare(grpc::ClientContext* ctx, const std::string& token, absl::Duration deadline = absl::Seconds(5)) {
  ctx->set_deadline(DeadlineAfter(deadline));
  if (!token.empty()) ctx->AddMetadata(auth::kTokenMetadataKey, token);
}

}  // namespace

grpc::Status RegisterAs(const std::string& scheduler, const Creds& creds, v1::Role role, int rank) {
  auto stub = v1::Scheduler::NewStub(Dial(scheduler, creds));
  grpc::ClientContext ctx;
  Prepare(&ctx, "", absl::Seconds(3));
  v1::RegisterRequest req;
  req.set_role(role);
  req.set_requested_rank(rank);
  req.set_hostname("attacker");
  req.set_pid(1);
  v1::RegisterResponse resp;
  return stub->Register(&ctx, req, &resp);
}

grpc::Status LeaveAs(const std::string& scheduler, const Creds& creds, const std::string& token, v1::Role role,
                     int rank, uint64_t incarnation) {
  auto stub = v1::Scheduler::NewStub(Dial(scheduler, creds));
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  v1::LeaveRequest req;
  req.set_role(role);
  req.set_rank(rank);
  req.set_incarnation(incarnation);
  req.set_failed(true);
  req.set_reason("attack: this node gave up");
  v1::LeaveResponse resp;
  return stub->Leave(&ctx, req, &resp);
}

grpc::Status HeartbeatAs(const std::string& scheduler, const Creds& creds, const std::string& token, v1::Role role,
                         int rank, uint64_t incarnation) {
  auto stub = v1::Scheduler::NewStub(Dial(scheduler, creds));
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  auto stream = stub->Heartbeat(&ctx);
  v1::HeartbeatRequest req;
  req.set_role(role);
  req.set_rank(rank);
  req.set_incarnation(incarnation);
  req.set_step(1);
  stream->Write(req);
  stream->WritesDone();
  v1::HeartbeatResponse resp;
  while (stream->Read(&resp)) {
  }
  return stream->Finish();
}

grpc::Status GetStatusWith(const std::string& scheduler, const Creds& creds, const std::string& token) {
  auto stub = v1::Scheduler::NewStub(Dial(scheduler, creds));
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  v1::GetStatusResponse resp;
  return stub->GetStatus(&ctx, v1::GetStatusRequest(), &resp);
}

grpc::Status GetStateWith(const std::string& server, const Creds& creds, const std::string& token, int* keys) {
  auto stub = v1::ParameterServer::NewStub(Dial(server, creds));
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  auto reader = stub->GetState(&ctx, v1::GetStateRequest());
  v1::KeyState k;
  *keys = 0;
  while (reader->Read(&k)) ++*keys;
  return reader->Finish();
}

grpc::Status ConfigureWith(const std::string& server, const Creds& creds, const std::string& token) {
  auto stub = v1::ParameterServer::NewStub(Dial(server, creds));
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  v1::ConfigureRequest req;
  req.set_kv_store("dist_sync");
  req.set_num_workers(2);
  req.mutable_optimizer()->set_name("sgd");
  req.mutable_optimizer()->set_learning_rate(100);
  v1::ConfigureResponse resp;
  return stub->Configure(&ctx, req, &resp);
}

grpc::Status PushNanAs(const std::string& server, const Creds& creds, const std::string& token, int rank,
                       uint64_t incarnation) {
  auto stub = v1::ParameterServer::NewStub(Dial(server, creds));
  grpc::ClientContext ctx;
  Prepare(&ctx, token);
  auto stream = stub->PushPull(&ctx);
  v1::PushPullRequest req;
  req.set_request_id(1);
  req.set_op(v1::OP_PUSH);
  req.set_worker_rank(rank);
  req.set_incarnation(incarnation);
  req.set_step(0);
  req.set_key(0);
  req.set_dtype(v1::DTYPE_FLOAT32);
  const float nan = std::nanf("");
  req.set_data(std::string(reinterpret_cast<const char*>(&nan), sizeof(nan)));
  stream->Write(req);
  stream->WritesDone();
  v1::PushPullResponse resp;
  const bool answered = stream->Read(&resp);
  while (stream->Read(&resp)) {
  }
  grpc::Status end = stream->Finish();
  if (!answered) return end;
  return grpc::Status(static_cast<grpc::StatusCode>(resp.code()), resp.message());
}

}  // namespace dtrain::testing
