#include "services/scheduler/scheduler_service.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth/node_auth.h"
#include "common/cluster_spec.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "services/scheduler/node_metrics.h"

namespace dtrain::scheduler {
namespace {

// When to answer a blocking call: a little before the caller's deadline, so our
// error (which names who is missing) reaches it instead of a bare DEADLINE_EXCEEDED.
// SchedulerClient adds a second to its deadlines for this.
absl::Time ReplyBy(const grpc::ServerContext& context) {
  const absl::Time now = absl::Now();
  const absl::Time deadline = absl::FromChrono(context.deadline());
  if (deadline - now > absl::Hours(24 * 365)) return absl::InfiniteFuture();  // no deadline set
  return deadline - std::min(absl::Seconds(1), (deadline - now) / 2);
}

// "worker (pid 77 on host-b)": a registering node, for log lines.
std::string WhoRegisters(const v1::RegisterRequest& request, Role role) {
  return absl::StrCat(RoleName(role), " (pid ", request.pid(), " on ", request.hostname(), ")");
}

// The registration Membership is to see, or why the request is refused before it:
// no role (the role is read once, here), a certificate that may not register as what
// the request asks (with TLS), or another cluster spec than the scheduler's.
absl::StatusOr<Registration> Admissible(const grpc::ServerContext& context, const v1::RegisterRequest& request,
                                        const SchedulerServiceOptions& options) {
  absl::StatusOr<Registration> registration = RegistrationFromProto(request);
  if (!registration.ok()) {
    DTRAIN_LOG(WARNING) << "refused registration of pid " << request.pid() << " on " << request.hostname() << ": "
                        << registration.status().message();
    return registration.status();
  }
  const Role role = registration->role;
  if (!options.token_key.empty()) {
    // A certificate names what its holder may be: a worker-1 certificate registers as
    // worker 1 (asked for or not), a "worker" one as any worker (peer_identity.h).
    const auth::Caller caller = auth::IdentifyCaller(context, options.token_key);
    absl::Status s =
        auth::MayRegisterAs(caller.identity, role, request.requested_rank(), &registration->requested_rank);
    if (!s.ok()) return auth::Refused(caller, s);
  }
  // Before membership: a node told another cluster would be refused for its sizes at
  // best, with a message that does not say which host list differs.
  const std::string node_name = request.requested_rank() >= 0
                                    ? absl::StrCat(RoleName(role), " ", request.requested_rank())
                                    : absl::StrCat("a ", RoleName(role));
  if (absl::Status s = CompareClusterSpecs(options.cluster_spec, request.cluster_spec(), node_name); !s.ok()) {
    DTRAIN_LOG(WARNING) << "refused registration of " << WhoRegisters(request, role) << ": " << s.message();
    return s;
  }
  if (absl::Status s = CheckNodeElastic(request.elastic(), options.elastic, RoleName(role)); !s.ok()) {
    DTRAIN_LOG(WARNING) << "refused registration of " << WhoRegisters(request, role) << ": " << s.message();
    return s;
  }
  return registration;
}

}  // namespace

SchedulerService::SchedulerService(Membership* membership, BarrierSet* barriers, SchedulerServiceOptions options)
    : membership_(membership), barriers_(barriers), options_(options), last_waiting_log_(absl::Now()) {}

grpc::Status SchedulerService::Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                                        v1::RegisterResponse* response) {
  absl::StatusOr<Registration> registration = Admissible(*context, *request, options_);
  if (!registration.ok()) return ToGrpc(registration.status());
  const Role role = registration->role;
  const std::string who = WhoRegisters(*request, role);
  uint64_t ticket = 0;
  absl::StatusOr<int> rank = membership_->Register(*registration, &ticket);
  if (!rank.ok()) {
    DTRAIN_LOG(WARNING) << "refused registration of " << who << ": " << rank.status().message();
    return ToGrpc(rank.status());
  }
  NodeKey self{role, *rank};
  DTRAIN_LOG(INFO) << NodeName(self) << (request->requested_rank() >= 0 ? " (as requested)" : "") << " joined: pid "
                   << request->pid() << " on " << request->hostname()
                   << (request->address().empty() ? "" : ", serving at " + request->address()) << "; "
                   << membership_->RegistrationText();
  if (membership_->AllRegistered()) {
    absl::MutexLock lock(&mu_);
    if (!logged_complete_) {
      logged_complete_ = true;
      DTRAIN_LOG(INFO) << "every node registered; the cluster is ready";
    }
  }
  const absl::Time deadline = std::min(absl::Now() + options_.register_timeout, ReplyBy(*context));
  absl::StatusOr<int> final_rank =
      membership_->AwaitAllRegistered(ticket, deadline, [context] { return context->IsCancelled(); });
  if (!final_rank.ok()) {
    DTRAIN_LOG(WARNING) << NodeName(self) << " was not admitted: " << final_rank.status().message();
    return ToGrpc(final_rank.status());
  }
  if (*final_rank != *rank) {
    self.rank = *final_rank;
    DTRAIN_LOG(INFO) << RoleName(role) << " pid " << request->pid() << " gave rank " << *rank
                     << " to the node that asked for it and is " << NodeName(self);
  }
  absl::StatusOr<Membership::Admission> admitted = membership_->Admitted(ticket);
  if (!admitted.ok()) return ToGrpc(admitted.status());
  if (admitted->rejoined) {
    DTRAIN_LOG(WARNING) << NodeName(self) << " rejoined (incarnation " << admitted->node.incarnation << ", restart "
                        << admitted->node.restarts << ")"
                        << (admitted->replaced_incarnation > 0
                                ? absl::StrCat("; incarnation ", admitted->replaced_incarnation, " is fenced")
                                : std::string());
    if (options_.metrics != nullptr && admitted->node.restarts > 0) {
      options_.metrics->NodeRejoined(self.role);
    }
  }
  response->set_rank(*final_rank);
  response->set_incarnation(admitted->node.incarnation);
  response->set_rejoined(admitted->rejoined);
  if (!options_.token_key.empty()) {
    response->set_token(auth::MintToken(options_.token_key, {role, *final_rank, admitted->node.incarnation}));
    // Servers check workers' tokens themselves (no call to the scheduler per stream).
    if (role == Role::kServer) response->set_token_key(options_.token_key);
  }
  *response->mutable_cluster() = ViewToProto(membership_->View());
  response->set_job_id(response->cluster().job_id());
  // A joiner's rank is not in it yet: it waits for a heartbeat's membership that holds it.
  if (options_.elastic != nullptr) *response->mutable_membership() = options_.elastic->State();
  return grpc::Status::OK;
}

absl::Status SchedulerService::CheckToken(const grpc::ServerContextBase& context, const NodeKey& self,
                                          uint64_t incarnation, const std::string& what) const {
  if (options_.token_key.empty()) return absl::OkStatus();
  const auth::Caller caller = auth::IdentifyCaller(context, options_.token_key);
  absl::Status s = auth::RequireNode(caller, self.role, self.rank, incarnation, what);
  return s.ok() ? s : auth::Refused(caller, s);
}

bool SchedulerService::HeartbeatStream::Fenced() const {
  return !fenced.ok() && absl::StrContains(fenced.message(), "fenced");
}

absl::Status SchedulerService::OpenHeartbeat(const grpc::ServerContextBase& context,
                                             const v1::HeartbeatRequest& request, HeartbeatStream* st) {
  DTRAIN_ASSIGN_OR_RETURN(st->self, KeyOf(request.role(), request.rank(), "HeartbeatRequest"));
  st->incarnation = request.incarnation();
  // A heartbeat in another node's name would keep a dead node "alive" or, broken
  // off, get a live one declared dead: the stream is its sender's only.
  DTRAIN_RETURN_IF_ERROR(CheckToken(context, st->self, st->incarnation, "heartbeat"));
  st->opened = true;
  // Only comebacks from now on: older ones are this stream's own past.
  membership_->RejoinsSince(&st->rejoin_cursor);
  if (options_.rollback != nullptr) {
    // An order taken up after a restart is for the workers that still wait for it,
    // whichever stream they ask on (AddRollback).
    if (auto done = options_.rollback->ForWorkers(); done && !options_.rollback->TakenUp(done->generation())) {
      st->rollback.rollback_sent = done->generation();
    }
  }
  return absl::OkStatus();
}

bool SchedulerService::AnswerHeartbeat(const v1::HeartbeatRequest& request, HeartbeatStream* st,
                                       v1::HeartbeatResponse* response) {
  const NodeKey& self = st->self;
  bool send = false;
  bool revived = false;
  absl::Status s = membership_->CheckCaller(self, request.job_id(), 0);
  if (s.ok()) {
    s = membership_->Heartbeat(self, &st->incarnation, request.step(), request.samples_per_sec(), request.resuming(),
                               &revived);
  }
  if (s.ok() && self.role == Role::kWorker) {
    lag_.Record(self.rank, request.step_at_unix_ms(), request.step());
    if (request.has_epoch_report()) membership_->RecordEpoch(self, EpochFromProto(request.epoch_report()));
  }
  if (revived) DTRAIN_LOG(WARNING) << NodeName(self) << " is back after being declared dead; it resumes";
  if (s.code() == absl::StatusCode::kNotFound) {
    // Not a failure of the job: this scheduler restarted and does not know the node
    // yet. The stream ends NOT_FOUND and the node registers again with its rank.
    st->unknown = s;
    return false;
  }
  if (s.code() == absl::StatusCode::kFailedPrecondition) st->fenced = s;
  std::string reason;
  bool failed = false;
  if (!s.ok()) {
    reason = std::string(s.message());
    failed = true;
  } else if (membership_->JobOver(&reason)) {
    reason = "job over: " + reason;
    failed = !membership_->Failure().empty();
  }
  if (!reason.empty() && !st->told_shutdown) {
    response->set_shutdown(true);
    response->set_reason(reason);
    response->set_failed(failed);
    st->told_shutdown = send = true;
  }
  for (const NodeRecord& dead : membership_->DeathsSince(&st->death_cursor)) {
    if (NodeKey{dead.role, dead.rank} == self) continue;
    *response->add_dead() = NodeToProto(dead);
    send = true;
  }
  for (const NodeRecord& back : membership_->RejoinsSince(&st->rejoin_cursor)) {
    if (NodeKey{back.role, back.rank} == self) continue;
    *response->add_rejoined() = NodeToProto(back);
    send = true;
  }
  if (s.ok()) AddRollback(self, st->incarnation, request, &st->rollback, response, &send);
  if (s.ok() && options_.elastic != nullptr) send = AddElastic(self, st->incarnation, request, response) || send;
  response->set_now_unix_ms(absl::ToUnixMillis(absl::Now()));
  return send;
}

grpc::Status SchedulerService::FinishHeartbeat(const HeartbeatStream& st) {
  if (!st.unknown.ok()) {
    DTRAIN_LOG(INFO) << "a heartbeat from a node this scheduler does not know: " << st.unknown.message()
                     << "; it should register again";
    return ToGrpc(st.unknown);
  }
  if (st.Fenced()) {
    DTRAIN_LOG(WARNING) << "refused a heartbeat: " << st.fenced.message();
    return ToGrpc(st.fenced);
  }
  if (st.opened && st.incarnation != 0 &&
      membership_->StreamClosed(st.self, st.incarnation, "heartbeat stream broke")) {
    NodeRecord node;
    node.role = st.self.role;
    node.rank = st.self.rank;
    OnDeath(node, "heartbeat stream broke");
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerService::Barrier(grpc::ServerContext* context, const v1::BarrierRequest* request,
                                       v1::BarrierResponse* /*response*/) {
  // Every wait has a deadline: no barrier may hang a job silently.
  if (request->timeout_ms() <= 0) {
    return ToGrpc(
        absl::InvalidArgumentError(absl::StrCat("barrier '", request->name(), "': timeout_ms must be positive")));
  }
  const absl::Time deadline = std::min(ReplyBy(*context), absl::Now() + absl::Milliseconds(request->timeout_ms()));
  const absl::StatusOr<NodeKey> key = KeyOf(request->role(), request->rank(), "BarrierRequest");
  if (!key.ok()) return ToGrpc(key.status());
  const NodeKey self = *key;
  if (absl::Status s = CheckToken(*context, self, request->incarnation(), "barrier"); !s.ok()) return ToGrpc(s);
  if (absl::Status s = membership_->CheckCaller(self, request->job_id(), request->incarnation()); !s.ok()) {
    DTRAIN_LOG(WARNING) << "refused barrier '" << request->name() << "' from " << NodeName(self) << ": " << s.message();
    return ToGrpc(s);
  }
  const absl::Time start = absl::Now();
  // A replacement's calls for rounds its predecessor passed return at once (BarrierSet).
  absl::Status s = barriers_->Wait(request->name(), request->group(), self, request->incarnation(), deadline,
                                   [context] { return context->IsCancelled(); });
  if (options_.metrics != nullptr) {
    options_.metrics->BarrierWaited(GroupName(request->group()), absl::ToDoubleSeconds(absl::Now() - start), s.ok());
  }
  if (!s.ok()) DTRAIN_LOG(WARNING) << NodeName(self) << ": " << s.message();
  return ToGrpc(s);
}

grpc::Status SchedulerService::Leave(grpc::ServerContext* context, const v1::LeaveRequest* request,
                                     v1::LeaveResponse* /*response*/) {
  const absl::StatusOr<NodeKey> key = KeyOf(request->role(), request->rank(), "LeaveRequest");
  if (!key.ok()) return ToGrpc(key.status());
  const NodeKey self = *key;
  if (absl::Status s = CheckToken(*context, self, request->incarnation(), "Leave"); !s.ok()) return ToGrpc(s);
  if (absl::Status s = membership_->CheckCaller(self, request->job_id(), request->incarnation()); !s.ok()) {
    DTRAIN_LOG(WARNING) << "refused Leave from " << NodeName(self) << ": " << s.message();
    return ToGrpc(s);
  }
  if (request->elastic_leave()) return ElasticLeave(self);
  // A joiner of an elastic job that failed before its first step (another model, say)
  // is removed as a dead one is, at once: the job goes on without it.
  if (request->failed() && options_.elastic != nullptr && self.role == Role::kWorker &&
      options_.elastic->RemoveFailedJoiner(self.rank, request->reason())) {
    if (absl::Status s = membership_->Leave(self, /*failed=*/false, request->reason()); !s.ok()) return ToGrpc(s);
    DTRAIN_LOG(ERROR) << NodeName(self) << " left FAILED before its first step: " << request->reason()
                      << "; the elastic job goes on without it";
    return grpc::Status::OK;
  }
  // A worker not in an elastic job's latest generation leaves after its removal: a
  // departure, which ends nothing (Membership::JobOver counts the latest generation).
  const bool departure = options_.elastic != nullptr && self.role == Role::kWorker && !request->failed() &&
                         !options_.elastic->InJob(self.rank);
  absl::Status s = membership_->Leave(self, request->failed(), request->reason());
  if (!s.ok()) return ToGrpc(s);
  if (departure) {
    DTRAIN_LOG(INFO) << NodeName(self) << " left the elastic job after its removal";
    return grpc::Status::OK;
  }
  if (request->failed()) {
    DTRAIN_LOG(ERROR) << NodeName(self) << " left FAILED: " << request->reason();
  } else {
    DTRAIN_LOG(INFO) << NodeName(self) << " left" << (request->reason().empty() ? "" : ": " + request->reason());
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerService::GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* /*request*/,
                                         v1::GetStatusResponse* response) {
  if (!options_.token_key.empty()) {
    // Who runs where, and every server's address: for the job's nodes and operators.
    const auth::Caller caller = auth::IdentifyCaller(*context, options_.token_key);
    absl::Status s = auth::RequireReader(caller, "GetStatus");
    if (s.ok() && caller.token) {
      // A token of a process that has been replaced opens nothing.
      std::optional<NodeRecord> holder = membership_->Find(NodeKey{caller.token->role, caller.token->rank});
      if (!holder || holder->incarnation != caller.token->incarnation) {
        s = absl::PermissionDeniedError(absl::StrCat("GetStatus refused: the token of ", auth::Describe(*caller.token),
                                                     " is not of the rank's current process"));
      }
    }
    if (!s.ok()) return ToGrpc(auth::Refused(caller, s));
  }
  for (const NodeRecord& node : membership_->Nodes()) {
    v1::NodeInfo* out = response->add_nodes();
    *out = NodeToProto(node);
    if (options_.rollback != nullptr && node.role == Role::kServer) {
      for (int64_t step : options_.rollback->SnapshotSteps(node.rank)) out->add_snapshot_steps(step);
    }
  }
  *response->mutable_cluster() = ViewToProto(membership_->View());
  response->set_now_unix_ms(absl::ToUnixMillis(absl::Now()));
  std::vector<v1::NodeInfo> nodes(response->nodes().begin(), response->nodes().end());
  if (auto lag = lag_.Lag(WorkersInJob(nodes))) *response->mutable_worker_lag() = *lag;
  if (options_.rollback != nullptr) {
    response->set_rollbacks(options_.rollback->rollbacks());
    response->set_last_rollback(options_.rollback->last_rollback());
  }
  if (options_.elastic != nullptr) *response->mutable_membership() = options_.elastic->State();
  return grpc::Status::OK;
}

grpc::Status SchedulerService::ElasticLeave(const NodeKey& self) {
  absl::Status s = self.role == Role::kWorker ? absl::OkStatus()
                                              : absl::FailedPreconditionError(absl::StrCat(
                                                    NodeName(self), ": only workers leave an elastic job on purpose"));
  if (s.ok() && options_.elastic == nullptr) {
    s = absl::FailedPreconditionError(
        absl::StrCat(NodeName(self), " asked to leave, but the job is not elastic (--elastic): it runs to the end"));
  }
  if (s.ok()) s = options_.elastic->Leave(self.rank);
  if (!s.ok()) DTRAIN_LOG(WARNING) << "refused a leave notice: " << s.message();
  return ToGrpc(s);
}

bool SchedulerService::AddElastic(const NodeKey& self, uint64_t incarnation, const v1::HeartbeatRequest& request,
                                  v1::HeartbeatResponse* response) {
  if (self.role == Role::kWorker) {
    *response->mutable_membership() = options_.elastic->State();
    return true;
  }
  const std::string failure = options_.elastic->OnServerHeartbeat(
      self.rank, incarnation, request.has_membership() ? &request.membership() : nullptr, response);
  if (!failure.empty()) FailElasticJob(failure);
  return response->has_membership_order();
}

void SchedulerService::FailElasticJob(const std::string& why) {
  if (!membership_->Failure().empty()) return;
  DTRAIN_LOG(ERROR) << why;
  membership_->FailJob(why);
}

void SchedulerService::TickElastic() {
  if (options_.elastic == nullptr) return;
  for (const NodeRecord& node : membership_->DroppableWorkers()) options_.elastic->Drop(node.rank, node.death_reason);
  if (const std::string failure = options_.elastic->Advance(); !failure.empty()) FailElasticJob(failure);
}

void SchedulerService::AddRollback(const NodeKey& self, uint64_t incarnation, const v1::HeartbeatRequest& request,
                                   RollbackStream* stream, v1::HeartbeatResponse* response, bool* send) {
  RollbackCoordinator* rollback = options_.rollback;
  if (rollback == nullptr) return;
  if (self.role == Role::kServer) {
    if (!request.has_snapshots()) return;  // a server without --snapshot-every takes no part
    // Where the job got to: servers report their shard's step on every heartbeat,
    // workers theirs every few seconds.
    int64_t job_step = 0;
    for (const NodeRecord& n : membership_->Nodes()) job_step = std::max(job_step, n.last_step);
    const int64_t before = rollback->rollbacks();
    std::optional<v1::RollbackOrder> order =
        rollback->OnServerHeartbeat(self.rank, incarnation, request.snapshots(), job_step, absl::Now());
    if (order) {
      *response->mutable_rollback() = *order;
      *send = true;
      if (rollback->rollbacks() > before && options_.metrics != nullptr) {
        options_.metrics->RolledBack(std::max<int64_t>(0, job_step - order->step()));
      }
    }
    return;
  }
  std::optional<v1::RollbackOrder> ready = rollback->ForWorkers();
  if (ready && rollback->TakenUp(ready->generation()) &&
      (!request.awaiting_rollback() || request.rollback_done() >= ready->generation())) {
    ready.reset();  // this worker does not wait for it: it did it already, or joined since
  }
  if (!ready || ready->generation() <= stream->rollback_sent) {
    if (!stream->told_enabled && rollback->Enabled()) {
      // Generation 0: no order, but a server's death will be rolled back: wait for it.
      response->mutable_rollback()->set_generation(0);
      *send = true;
      stream->told_enabled = true;
    }
    return;
  }
  stream->told_enabled = true;
  stream->rollback_sent = ready->generation();
  *response->mutable_rollback() = *ready;
  for (const NodeRecord& server : membership_->View().servers) {
    *response->mutable_rollback()->add_servers() = NodeToProto(server);
  }
  *send = true;
}

void SchedulerService::Tick() {
  for (const NodeKey& key : membership_->SettleRestart()) {
    DTRAIN_LOG(WARNING) << NodeName(key)
                        << " did not register again with this restarted scheduler while every server did: "
                           "assuming it left the job before the restart (FINISHED); a new process may still take "
                           "its rank";
  }
  for (const NodeRecord& node : membership_->SweepSilent()) OnDeath(node, "heartbeats stopped");
  if (options_.rollback != nullptr) {
    options_.rollback->Check(absl::Now());
    // No snapshot in common, or servers that did not reload: the job cannot go on.
    if (const std::string why = options_.rollback->Failure(); !why.empty()) membership_->FailJob(why);
  }
  TickElastic();
  // A dead worker that did not come back in time: the job failed, and barriers
  // that still wait for it fail now.
  for (const NodeRecord& node : membership_->ExpireRejoinWaits()) {
    const std::string why = membership_->Failure();
    DTRAIN_LOG(ERROR) << why;
    barriers_->NodeDied(NodeKey{node.role, node.rank}, why);
  }
  if (options_.metrics != nullptr) {
    const std::vector<v1::NodeInfo> nodes = NodesToProto(membership_->Nodes());
    RecordNodeMetrics(nodes, lag_.Lag(WorkersInJob(nodes)), *options_.metrics);
  }
  if (membership_->AllRegistered()) return;
  absl::MutexLock lock(&mu_);
  if (absl::Now() - last_waiting_log_ < options_.waiting_log_interval) return;
  last_waiting_log_ = absl::Now();
  DTRAIN_LOG(INFO) << "still waiting for " << membership_->RegistrationText();
}

void SchedulerService::OnDeath(const NodeRecord& node, const std::string& why) {
  const NodeKey key{node.role, node.rank};
  std::optional<NodeRecord> info = membership_->Find(key);
  if (!info) info = node;
  DTRAIN_LOG(WARNING) << NodeName(key) << " is DEAD: " << why << " (pid " << info->pid << " on " << info->hostname
                      << ", last step " << info->last_step << ")";
  // Within the rejoin timeout a dead worker may come back (or be replaced): barriers
  // keep waiting for it, and fail if it does not (Tick).
  if (membership_->MayRejoin(key)) {
    DTRAIN_LOG(WARNING) << "waiting up to the rejoin timeout for " << NodeName(key) << " to rejoin";
  } else {
    barriers_->NodeDied(key, why);
  }
  if (options_.metrics != nullptr) options_.metrics->NodeDied(key.role);
  const int replication = membership_->View().replication;
  if (key.role == Role::kServer && replication > 1) {
    // The workers route around it themselves (services/worker/kv/dist_kvstore.h); the
    // scheduler only counts it and says so.
    DTRAIN_LOG(WARNING) << "failover: " << NodeName(key) << "'s key ranges go on at their next replica (--replication "
                        << replication << ")";
    if (options_.metrics != nullptr) options_.metrics->ServerFailedOver();
  }
}

void SchedulerService::Close(const absl::Status& why) {
  membership_->Close(why);
  barriers_->Close();
}

}  // namespace dtrain::scheduler
