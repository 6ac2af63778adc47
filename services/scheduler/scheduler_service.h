// The Scheduler gRPC service: translates RPCs into calls on Membership and
// BarrierSet, and logs what an operator needs (joins, deaths, who is missing).
//
// Register, Barrier, Leave and GetStatus use the sync API: handlers block (Register
// until everyone is in, Barrier until the round completes); a scheduler serves tens of
// nodes, one thread each is fine. The Heartbeat stream, open for a node's whole life,
// is a callback reactor (heartbeat_reactor.cc) and holds no thread between heartbeats.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/scheduler/scheduler_metrics.h"
#include "dtrain/v1/scheduler.grpc.pb.h"
#include "services/scheduler/barrier.h"
#include "services/scheduler/elastic_job.h"
#include "services/scheduler/membership.h"
#include "services/scheduler/membership_proto.h"
#include "services/scheduler/rollback_coordinator.h"
#include "services/scheduler/worker_lag.h"
#include "common/defaults.h"

namespace dtrain::scheduler {

struct SchedulerServiceOptions {
  // Register waits at most this long for the others (less if the call's own deadline is sooner).
  absl::Duration register_timeout = absl::Seconds(kDefaultRegisterTimeoutSeconds);
  // How often Tick logs "still waiting for ..." while registration is incomplete.
  absl::Duration waiting_log_interval = absl::Seconds(10);
  // Nodes, deaths, barrier waits and worker lag (null: none); must outlive the service.
  scheduler::SchedulerMetrics* metrics = nullptr;
  // Rollback to the servers' snapshots (null: none); must outlive the service.
  RollbackCoordinator* rollback = nullptr;
  // With TLS: the job's token key (common/auth/node_token.h). Registration is then
  // admitted by certificate name, each node gets a token for its rank and incarnation,
  // and every later call must carry it. Empty (plaintext): nothing is checked.
  std::string token_key;
  // A spec-launched job's cluster spec (common/cluster_spec.h; empty: none): a node
  // that registers with another is refused, naming the difference.
  std::string cluster_spec;
  // An elastic job's membership changes (null: not elastic); must outlive the service.
  ElasticJob* elastic = nullptr;
};

class SchedulerService final : public v1::Scheduler::WithCallbackMethod_Heartbeat<v1::Scheduler::Service> {
 public:
  SchedulerService(Membership* membership, BarrierSet* barriers, SchedulerServiceOptions options);

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse>* Heartbeat(
      grpc::CallbackServerContext* context) override;
  grpc::Status Barrier(grpc::ServerContext* context, const v1::BarrierRequest* request,
                       v1::BarrierResponse* response) override;
  grpc::Status Leave(grpc::ServerContext* context, const v1::LeaveRequest* request,
                     v1::LeaveResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::GetStatusResponse* response) override;

  // Periodic work, from the main loop every few hundred ms: declares silent nodes
  // dead, refreshes the node gauges, and logs progress while registration is incomplete.
  void Tick();

  // Wakes every blocked handler; call before grpc::Server::Shutdown. `why` reaches the
  // nodes still waiting in Register (e.g. the registration deadline's text).
  void Close(const absl::Status& why = absl::UnavailableError("the scheduler is shutting down"));

 private:
  void OnDeath(const NodeRecord& node, const std::string& why);
  // With a token key: that the call carries the token of this node's current
  // incarnation (logged and returned when not). OK without one.
  absl::Status CheckToken(const grpc::ServerContextBase& context, const NodeKey& self, uint64_t incarnation,
                          const std::string& what) const;
  // A server's snapshot report in, a rollback order out (servers at once,
  // workers once every server reloaded; a worker's stream gets each order once and
  // none that was complete before the stream opened).
  struct RollbackStream {
    uint64_t rollback_sent = 0;  // the newest order this stream was given
    bool told_enabled = false;   // told (generation 0) that servers snapshot
  };
  void AddRollback(const NodeKey& self, uint64_t incarnation, const v1::HeartbeatRequest& request,
                   RollbackStream* stream, v1::HeartbeatResponse* response, bool* send);
  // One heartbeat stream: reads a heartbeat, answers it through the three below, and
  // reads the next once the answer is written (heartbeat_reactor.cc).
  class HeartbeatReactor;
  // One heartbeat stream's state, from its first request to its end.
  struct HeartbeatStream {
    NodeKey self;
    uint64_t incarnation = 0;  // 0 (an older client): the current one
    size_t death_cursor = 0;
    size_t rejoin_cursor = 0;
    RollbackStream rollback;
    bool told_shutdown = false;
    bool opened = false;
    absl::Status fenced;   // how the stream ends when this process is not the rank's any more
    absl::Status unknown;  // NOT_FOUND: the node is not registered here (a restarted scheduler)
    bool Fenced() const;
  };
  // The stream's first request: who speaks (checked against its token).
  absl::Status OpenHeartbeat(const grpc::ServerContextBase& context, const v1::HeartbeatRequest& request,
                             HeartbeatStream* st);
  // One heartbeat in, the answer out; true when `*response` must be sent.
  bool AnswerHeartbeat(const v1::HeartbeatRequest& request, HeartbeatStream* st, v1::HeartbeatResponse* response);
  // An elastic job's part of a heartbeat answer: the server's order, the workers'
  // membership (on every answer: it is small); true when `*response` must be sent.
  bool AddElastic(const NodeKey& self, uint64_t incarnation, const v1::HeartbeatRequest& request,
                  v1::HeartbeatResponse* response);
  // LeaveRequest.elastic_leave: a worker's notice that it goes with the next change.
  grpc::Status ElasticLeave(const NodeKey& self);
  // Each tick: dead workers past the rejoin timeout are dropped, a pending change runs.
  void TickElastic();
  // The elastic job cannot go on (`why` names the worker): the job fails, once.
  void FailElasticJob(const std::string& why);
  // How the stream ends once its requests stop (or it was refused).
  grpc::Status FinishHeartbeat(const HeartbeatStream& st);

  Membership* const membership_;
  BarrierSet* const barriers_;
  const SchedulerServiceOptions options_;
  // Workers' steps at shared ticks, for the lag (metrics and GetStatus).
  WorkerLagTracker lag_;
  absl::Mutex mu_;
  absl::Time last_waiting_log_ ABSL_GUARDED_BY(mu_);
  bool logged_complete_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dtrain::scheduler
