// A node's side of the scheduler protocol: register, heartbeat, barriers, leave.
//
// Every call has a deadline; errors from the scheduler (which name missing nodes)
// are passed through unchanged.
//
// A restarted scheduler (same address, nothing kept) is survived: when the heartbeat
// stream, a barrier or Leave finds it gone (UNAVAILABLE) or not knowing this node
// (NOT_FOUND "... is not registered with this scheduler"), the client registers again
// with its rank, job id and incarnation and carries on (docs/recovery.md).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/step_history.h"
#include "dtrain/v1/scheduler.grpc.pb.h"
#include "common/defaults.h"

namespace dtrain {

class SchedulerClient {
 public:
  // Does not contact the scheduler yet. `cluster_spec`: a spec-launched job's canonical
  // cluster spec (common/cluster_spec.h, --cluster-spec), sent with every registration
  // so that the scheduler refuses a node told another cluster; "" for none.
  explicit SchedulerClient(const std::string& address, std::string cluster_spec = "");
  ~SchedulerClient();  // stops the heartbeat stream

  // Blocks until every expected node registered, or `timeout` (the scheduler names
  // who is missing). UNAVAILABLE (naming the address) when the scheduler cannot be
  // reached within `timeout`. A requested rank held by a live node of a running job
  // (UNAVAILABLE: this process replaces one the scheduler has not yet declared dead) is
  // retried until `timeout`, then that error is returned; before the job starts the
  // holder is a duplicate (ALREADY_EXISTS) and the error comes at once.
  absl::StatusOr<v1::RegisterResponse> Register(v1::Role role, const std::string& my_address, int requested_rank,
                                                int num_workers, int num_servers, absl::Duration timeout);

  struct HeartbeatHooks {
    // Called (from the heartbeat thread) when the scheduler says the job is over, or
    // is lost; job_failed() tells which way it ended.
    std::function<void(const std::string& reason)> on_shutdown;
    // Called when the scheduler reports a node dead. `node.dead_since_unix_ms` is
    // converted to this machine's clock (the scheduler's now_unix_ms is the reference).
    std::function<void(const v1::NodeInfo& node)> on_dead;
    // Called when the scheduler reports a node back: a new process took its rank
    // (incarnation + 1), or a node declared dead resumed heartbeating.
    std::function<void(const v1::NodeInfo& node)> on_rejoined;
    // Called with each answer that carries a rollback order; the same
    // order comes again until acted on: RollbackOrder.generation tells them apart.
    std::function<void(const v1::RollbackOrder& order)> on_rollback;
    // Elastic jobs: called with each answer that carries the job's membership (the
    // schedule as committed on every server; the same one comes again on each).
    std::function<void(const v1::MembershipState& membership)> on_membership;
    // Servers of an elastic job: called with each answer that carries a membership
    // order (propose, commit, abort); the same order comes again until a heartbeat's
    // membership report (SetMembershipReportSource) answers it.
    std::function<void(const v1::MembershipOrder& order)> on_membership_order;
    // How long a broken stream is retried before on_shutdown; matches the
    // scheduler's default --heartbeat-timeout, after which it has declared us dead.
    absl::Duration reconnect_for = absl::Seconds(kDefaultHeartbeatTimeoutSeconds);
    // How long a registration again at a restarted scheduler may wait (it answers
    // once every node of the job is back); then on_shutdown, failed.
    absl::Duration reregister_timeout = absl::Seconds(kDefaultRegisterTimeoutSeconds);
  };
  // Starts the heartbeat stream (after Register). A request every `interval` carries
  // the step and speed set with SetProgress. If the stream breaks it reconnects for
  // `hooks.reconnect_for` (the scheduler's own deadline), then logs and calls
  // on_shutdown. on_shutdown runs at most once. Hooks run on the heartbeat thread
  // and must not destroy this client (its destructor joins that thread).
  // A stream that the scheduler ends with NOT_FOUND (a restarted scheduler) is not
  // a break: the client registers again (up to hooks.reregister_timeout) and reopens it.
  //
  // Workers' heartbeats go out at ticks shared by the job (multiples of `interval` on
  // the wall clock) with the step of that tick (HeartbeatRequest.step_at_unix_ms), so
  // that the scheduler compares steps of one moment.
  void StartHeartbeat(absl::Duration interval, HeartbeatHooks hooks);
  // Cheap (call it every step): the step is remembered with the time it was reached.
  void SetProgress(int64_t step, double samples_per_sec);
  // Workers: the newest epoch's figures, sent on every heartbeat from now
  // on (at once, then at each tick); other workers read them with GetStatus.
  void SetEpochReport(const v1::EpochReport& report);
  // Recovery (docs/recovery.md): a rejoined worker says `resuming` on its heartbeats
  // until it has caught up with the job (its first redone step is done); the
  // scheduler shows the rank REJOINING meanwhile, then ALIVE. A change is sent at
  // once (not at the next interval) when the heartbeat runs. Thread-safe, but not
  // concurrently with StartHeartbeat.
  void SetResuming(bool resuming);
  // Workers: whether a step waits for a rollback order, and the last order carried out
  // (HeartbeatRequest.awaiting_rollback, rollback_done), on every heartbeat.
  void SetRollbackState(bool awaiting, uint64_t done) {
    awaiting_rollback_.store(awaiting);
    rollback_done_.store(done);
  }
  bool resuming() const { return resuming_.load(); }
  // Servers with snapshots: sent on every heartbeat from now on; a change
  // is sent at once. Thread-safe.
  void SetSnapshotReport(const v1::SnapshotReport& report);
  // Where the heartbeats' step comes from, read at each one (servers: their shard's
  // step); call before StartHeartbeat. Unset: SetProgress's.
  void SetStepSource(std::function<int64_t()> step) { step_source_ = std::move(step); }
  // Servers: the newest incarnation admitted per worker rank, sent when registering
  // again at a restarted scheduler (RegisterRequest.worker_incarnations).
  void SetWorkerIncarnationSource(std::function<std::vector<uint64_t>()> source) {
    worker_incarnations_ = std::move(source);
  }
  // Servers of an elastic job: the membership report sent with every heartbeat
  // (HeartbeatRequest.membership), read at each one; call before StartHeartbeat.
  void SetMembershipReportSource(std::function<v1::MembershipReport()> source) {
    membership_report_ = std::move(source);
  }
  // Sends a heartbeat now rather than at the next interval (an order was answered).
  // Thread-safe; a no-op before StartHeartbeat.
  void HeartbeatNow();

  // Re-entered after UNAVAILABLE / NOT_FOUND (a scheduler restart: rounds are
  // counted per name, so a re-entered round completes once everyone re-entered)
  // until `timeout`; then "lost the scheduler at HOST:PORT for N s".
  absl::Status Barrier(const std::string& name, v1::BarrierGroup group, absl::Duration timeout);
  // Retried like Barrier within `timeout`.
  absl::Status Leave(bool failed, const std::string& reason, absl::Duration timeout = absl::Seconds(10));
  // A worker of an elastic job asking to be taken out of it (LeaveRequest.elastic_leave):
  // retried like Leave; the scheduler's refusal (FAILED_PRECONDITION naming MIN) as is.
  absl::Status AnnounceLeave(const std::string& reason, absl::Duration timeout = absl::Seconds(10));
  absl::StatusOr<v1::GetStatusResponse> GetStatus(absl::Duration timeout);

  // Once on_shutdown ran: true when the job failed or the scheduler was lost (exit
  // non-zero), false when it ended normally.
  bool job_failed() const { return job_failed_.load(); }

  int rank() const { return rank_; }
  v1::Role role() const { return role_; }
  // The job this node belongs to; sent with every request (call before Register;
  // empty: whatever job the scheduler runs, learnt from Register).
  void set_job_id(const std::string& job_id) { job_id_ = job_id; }
  const std::string& job_id() const { return job_id_; }
  // Replicas per key range (--replication), sent with Register so that the scheduler
  // refuses a node configured otherwise; 0 (the default): not said.
  void set_replication(int replication) { replication_ = replication; }
  // --elastic as given ("2:4"; empty: not elastic), sent with Register so that the
  // scheduler refuses a node configured otherwise (call before Register).
  void set_elastic(std::string bounds) { elastic_ = std::move(bounds); }
  // From Register: this process's incarnation of its rank, sent with every request
  // so that a newer process of the same rank fences this one off.
  uint64_t incarnation() const { return incarnation_; }
  // From Register: the job had already started (this process replaces one of its rank).
  bool rejoined() const { return rejoined_; }
  // How many times this client registered again at a restarted scheduler.
  int reregistrations() const { return static_cast<int>(generation_.load()); }

 private:
  class Heartbeat;
  using RegisterResult = absl::StatusOr<v1::RegisterResponse>;
  // One Register call (waiting for the channel first), cancellable by the destructor.
  RegisterResult RegisterOnce(const v1::RegisterRequest& request, absl::Time deadline);
  // Registers again with rank, job id and incarnation, unless another thread did so
  // since `seen` (generation_) was read. Retries an unreachable scheduler until `deadline`.
  absl::Status RegisterAgain(uint64_t seen, absl::Time deadline, const std::string& why);
  // Between attempts at a scheduler that is away: returns at `until`, when the client
  // closes, or as soon as a channel that was not connected connects. Meanwhile this
  // thread waits on the channel, because with gRPC's synchronous API a channel's
  // connection attempts make progress only while some thread waits on it (a call, or
  // WaitForConnected), and otherwise only at gRPC's backup poll every 5 s: fail-fast
  // calls separated by plain sleeps saw a restarted scheduler 5 to 10 s late.
  void PauseBeforeRetry(absl::Time until);
  // Runs `call` (one attempt, given the time left) until it succeeds, fails for good,
  // or `deadline`; registers again on NOT_FOUND. `what` names the call in errors.
  absl::Status Retrying(const std::string& what, absl::Time deadline,
                        const std::function<grpc::Status(absl::Duration left)>& call);
  // Leave and AnnounceLeave: `request` with this node's identity, retried like Leave.
  absl::Status SendLeave(v1::LeaveRequest request, absl::Duration timeout);
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
  v1::Role role_ = v1::ROLE_UNSPECIFIED;
  int rank_ = -1;
  std::string job_id_;
  int replication_ = 0;
  std::string elastic_;
  const std::string cluster_spec_;  // sent with every registration
  uint64_t incarnation_ = 0;
  bool rejoined_ = false;
  // What Register sent, for registering again.
  std::string my_address_;
  int num_workers_ = 0;
  int num_servers_ = 0;
  std::atomic<uint64_t> generation_{0};  // registrations again so far
  absl::Mutex register_mu_;              // one registration again at a time
  absl::Mutex cancel_mu_;
  bool closing_ ABSL_GUARDED_BY(cancel_mu_) = false;
  grpc::ClientContext* register_context_ ABSL_GUARDED_BY(cancel_mu_) = nullptr;
  std::atomic<int64_t> step_{0};
  std::atomic<double> samples_per_sec_{0};
  std::atomic<bool> resuming_{false};
  std::atomic<bool> awaiting_rollback_{false};
  std::atomic<uint64_t> rollback_done_{0};
  absl::Mutex report_mu_;
  std::optional<v1::SnapshotReport> snapshot_report_ ABSL_GUARDED_BY(report_mu_);
  std::optional<v1::EpochReport> epoch_report_ ABSL_GUARDED_BY(report_mu_);
  StepHistory step_history_;  // SetProgress's steps, for the ticks
  std::function<int64_t()> step_source_;
  std::function<std::vector<uint64_t>()> worker_incarnations_;
  std::function<v1::MembershipReport()> membership_report_;
  std::atomic<bool> job_failed_{false};
  std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace dtrain
