// A node's side of the scheduler protocol: register, heartbeat, barriers, leave.
//
// Every call has a deadline; errors from the scheduler (which name missing nodes)
// are passed through unchanged.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dtrain/v1/scheduler.grpc.pb.h"

namespace dtrain {

class SchedulerClient {
 public:
  // Does not contact the scheduler yet.
  explicit SchedulerClient(const std::string& address);
  ~SchedulerClient();  // stops the heartbeat stream

  // Blocks until every expected node registered, or `timeout` (the scheduler names
  // who is missing). UNAVAILABLE (naming the address) when the scheduler cannot be
  // reached within `timeout`.
  absl::StatusOr<v1::RegisterResponse> Register(v1::Role role, const std::string& my_address,
                                                int requested_rank, int num_workers, int num_servers,
                                                absl::Duration timeout);

  struct HeartbeatHooks {
    // Called (from the heartbeat thread) when the scheduler says the job is over, or
    // is lost; job_failed() tells which way it ended.
    std::function<void(const std::string& reason)> on_shutdown;
    // Called when the scheduler reports a node dead.
    std::function<void(const v1::NodeInfo& node)> on_dead;
    // How long a broken stream is retried before on_shutdown; matches the
    // scheduler's default --heartbeat-timeout, after which it has declared us dead.
    absl::Duration reconnect_for = absl::Seconds(10);
  };
  // Starts the heartbeat stream (after Register). A request every `interval` carries
  // the step and speed set with SetProgress. If the stream breaks it reconnects for
  // `hooks.reconnect_for` (the scheduler's own deadline), then logs and calls
  // on_shutdown. on_shutdown runs at most once. Hooks run on the heartbeat thread
  // and must not destroy this client (its destructor joins that thread).
  void StartHeartbeat(absl::Duration interval, HeartbeatHooks hooks);
  void SetProgress(int64_t step, double samples_per_sec);

  absl::Status Barrier(const std::string& name, v1::BarrierGroup group, absl::Duration timeout);
  absl::Status Leave(bool failed, const std::string& reason, absl::Duration timeout = absl::Seconds(10));
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
  // From Register: this process's incarnation of its rank, sent with every request
  // so that a newer process of the same rank fences this one off.
  uint64_t incarnation() const { return incarnation_; }
  // From Register: the job had already started (this process replaces one of its rank).
  bool rejoined() const { return rejoined_; }

 private:
  class Heartbeat;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
  v1::Role role_ = v1::ROLE_UNSPECIFIED;
  int rank_ = -1;
  std::string job_id_;
  uint64_t incarnation_ = 0;
  bool rejoined_ = false;
  std::atomic<int64_t> step_{0};
  std::atomic<double> samples_per_sec_{0};
  std::atomic<bool> job_failed_{false};
  std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace dtrain
