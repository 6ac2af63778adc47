#include "common/scheduler_client.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/cluster_spec.h"
#include "common/credentials.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain {
namespace {

// The scheduler answers a blocking call (Register, Barrier) up to a second before
// the call's gRPC deadline; this slack lets its error, which names the missing
// nodes, arrive instead of gRPC's bare "Deadline Exceeded".
constexpr absl::Duration kReplyMargin = absl::Seconds(1);
// Between attempts at a scheduler that is away (restarting) or refusing a rank.
constexpr absl::Duration kRetryPause = absl::Milliseconds(200);

// The scheduler lost this node or is away: worth registering again / retrying.
bool SchedulerAway(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::NOT_FOUND;
}

std::string Hostname() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

// The heartbeat thread: one stream at a time, each with a reader thread of its own,
// reconnecting while the scheduler may still count us alive.
class SchedulerClient::Heartbeat {
 public:
  Heartbeat(SchedulerClient* client, absl::Duration interval, HeartbeatHooks hooks)
      : client_(client), interval_(interval), hooks_(std::move(hooks)), thread_([this] { Loop(); }) {}

  ~Heartbeat() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      // Cancelling unblocks the reader; the writer wakes from the condition variable.
      if (context_ != nullptr) context_->TryCancel();
      cv_.SignalAll();
    }
    thread_.join();
  }

  // Sends a request now rather than at the next interval (a state change).
  void Poke() {
    absl::MutexLock lock(&mu_);
    poke_ = true;
    cv_.SignalAll();
  }

 private:
  using Stream = grpc::ClientReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>;

  void Loop() {
    absl::Time broken_since = absl::InfiniteFuture();  // when the stream last broke
    while (true) {
      grpc::ClientContext context;
      {
        absl::MutexLock lock(&mu_);
        if (stop_) return;
        context_ = &context;
        stream_done_ = false;
      }
      const uint64_t seen = client_->generation_.load();
      const grpc::Status status = RunStream(context, &broken_since);
      {
        absl::MutexLock lock(&mu_);
        context_ = nullptr;
        if (stop_) return;
      }
      if (shutdown_seen_) return;

      if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
        // A restarted scheduler that does not know us: register again, then a new stream.
        absl::Status again =
            client_->RegisterAgain(seen, absl::Now() + hooks_.reregister_timeout, status.error_message());
        {
          absl::MutexLock lock(&mu_);
          if (stop_) return;
        }
        if (!again.ok()) {
          ShutdownOnce(std::string(again.message()), /*failed=*/true);
          return;
        }
        broken_since = absl::InfiniteFuture();
        continue;
      }

      // The stream broke under us: retry while the scheduler may still count us alive.
      const absl::Time now = absl::Now();
      if (broken_since == absl::InfiniteFuture()) {
        broken_since = now;
        DTRAIN_LOG(WARNING) << "heartbeat stream to the scheduler at " << client_->address_
                            << " broke: " << status.error_message() << "; reconnecting";
      }
      if (now - broken_since >= hooks_.reconnect_for) {
        ShutdownOnce(absl::StrCat("lost the scheduler at ", client_->address_, " for ",
                                  absl::FormatDuration(hooks_.reconnect_for)),
                     /*failed=*/true);
        return;
      }
      // Ends at once when the client closes: its destructor says so before it stops us.
      client_->PauseBeforeRetry(now + std::min(interval_, absl::Seconds(1)));
    }
  }

  // One stream, until it breaks or the destructor stops it; returns how it ended.
  grpc::Status RunStream(grpc::ClientContext& context, absl::Time* broken_since) {
    std::unique_ptr<Stream> stream = client_->stub_->Heartbeat(&context);
    std::thread reader([&] { Read(*stream); });
    Write(*stream, broken_since);
    // The writer stops when the reader saw the stream end (keep the scheduler's
    // status: NOT_FOUND means "register again"), when a write failed (the call is
    // over, the reader ends too), or on stop (the destructor cancelled the call).
    reader.join();
    return stream->Finish();
  }

  // The scheduler's news: dead nodes, and the end of the job.
  void Read(Stream& stream) {
    v1::HeartbeatResponse response;
    while (stream.Read(&response)) {
      // Deaths in this machine's clock: the scheduler's "now" is the reference.
      const int64_t skew_ms = response.now_unix_ms() > 0 ? absl::ToUnixMillis(absl::Now()) - response.now_unix_ms() : 0;
      for (const auto& node : response.dead()) {
        if (!hooks_.on_dead) continue;
        v1::NodeInfo local = node;
        if (local.dead_since_unix_ms() > 0) local.set_dead_since_unix_ms(local.dead_since_unix_ms() + skew_ms);
        hooks_.on_dead(local);
      }
      for (const auto& node : response.rejoined()) {
        if (hooks_.on_rejoined) hooks_.on_rejoined(node);
      }
      if (response.has_rollback() && hooks_.on_rollback) hooks_.on_rollback(response.rollback());
      if (response.has_membership() && hooks_.on_membership) hooks_.on_membership(response.membership());
      if (response.has_membership_order() && hooks_.on_membership_order) {
        hooks_.on_membership_order(response.membership_order());
      }
      if (response.shutdown()) ShutdownOnce(response.reason(), response.failed());
    }
    absl::MutexLock lock(&mu_);
    stream_done_ = true;
    cv_.SignalAll();
  }

  // One request now (so the scheduler sees us ALIVE at once), then one per interval.
  // The first request that goes out on a ready channel ends a "broken" spell.
  void Write(Stream& stream, absl::Time* broken_since) {
    bool wrote = false;
    int64_t tick_ms = 0;  // the tick this request is for; 0: the first one, or a poke
    while (true) {
      v1::HeartbeatRequest request;
      request.set_role(client_->role_);
      request.set_rank(client_->rank_);
      request.set_step(client_->step_source_ ? client_->step_source_() : client_->step_.load());
      if (tick_ms > 0 && !client_->step_source_) {
        // The step of the tick itself, not of the moment this thread woke up.
        if (std::optional<int64_t> at = client_->step_history_.StepAt(tick_ms)) {
          request.set_step(*at);
          request.set_step_at_unix_ms(tick_ms);
        }
      }
      request.set_samples_per_sec(client_->samples_per_sec_.load());
      request.set_job_id(client_->job_id_);
      request.set_incarnation(client_->incarnation_);
      request.set_resuming(client_->resuming_.load());
      request.set_awaiting_rollback(client_->awaiting_rollback_.load());
      request.set_rollback_done(client_->rollback_done_.load());
      {
        absl::MutexLock lock(&client_->report_mu_);
        if (client_->snapshot_report_) *request.mutable_snapshots() = *client_->snapshot_report_;
        if (client_->epoch_report_) *request.mutable_epoch_report() = *client_->epoch_report_;
      }
      if (client_->membership_report_) *request.mutable_membership() = client_->membership_report_();
      if (!stream.Write(request)) return;
      if (!wrote && client_->channel_->GetState(false) == GRPC_CHANNEL_READY) {
        wrote = true;
        *broken_since = absl::InfiniteFuture();
      }
      absl::MutexLock lock(&mu_);
      // The next multiple of the interval on the wall clock: every worker's ticks fall
      // on the same moments, and no two requests are more than one interval apart.
      const int64_t interval_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(interval_));
      const int64_t next_ms = (absl::ToUnixMillis(absl::Now()) / interval_ms + 1) * interval_ms;
      const absl::Time next = absl::FromUnixMillis(next_ms);
      while (!stop_ && !stream_done_ && !poke_ && absl::Now() < next) cv_.WaitWithDeadline(&mu_, next);
      if (stop_ || stream_done_) return;
      tick_ms = poke_ ? 0 : next_ms;
      poke_ = false;
    }
  }

  void ShutdownOnce(const std::string& reason, bool failed) {
    if (shutdown_seen_.exchange(true)) return;
    client_->job_failed_.store(failed);
    if (failed) {
      DTRAIN_LOG(ERROR) << "the job failed: " << reason;
    } else {
      DTRAIN_LOG(INFO) << "the scheduler ended the job: " << reason;
    }
    if (hooks_.on_shutdown) hooks_.on_shutdown(reason);
  }

  SchedulerClient* const client_;
  const absl::Duration interval_;
  const HeartbeatHooks hooks_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool stream_done_ ABSL_GUARDED_BY(mu_) = false;                // the current stream's reader has ended
  bool poke_ ABSL_GUARDED_BY(mu_) = false;                       // send the next request now
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the current stream's
  std::atomic<bool> shutdown_seen_{false};
  std::thread thread_;  // last: starts once everything above is set
};

SchedulerClient::SchedulerClient(const std::string& address, std::string cluster_spec)
    : address_(address),
      channel_(MakeChannel(address)),
      stub_(v1::Scheduler::NewStub(channel_)),
      cluster_spec_(std::move(cluster_spec)) {}

// Stops the heartbeat before the stub and channel it uses go; a registration again
// in progress (on the heartbeat thread) is cancelled first.
SchedulerClient::~SchedulerClient() {
  {
    absl::MutexLock lock(&cancel_mu_);
    closing_ = true;
    if (register_context_ != nullptr) register_context_->TryCancel();
  }
  heartbeat_.reset();
}

SchedulerClient::RegisterResult SchedulerClient::RegisterOnce(const v1::RegisterRequest& request, absl::Time deadline) {
  // Waits for the channel in slices, so that the destructor need not wait for it.
  while (!channel_->WaitForConnected(absl::ToChronoTime(std::min(deadline, absl::Now() + kRetryPause)))) {
    {
      absl::MutexLock lock(&cancel_mu_);
      if (closing_) return absl::CancelledError("the client is closing");
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat("cannot reach the scheduler at ", address_));
    }
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline + kReplyMargin));
  context.set_wait_for_ready(true);
  {
    absl::MutexLock lock(&cancel_mu_);
    if (closing_) return absl::CancelledError("the client is closing");
    register_context_ = &context;
  }
  v1::RegisterResponse response;
  grpc::Status s = stub_->Register(&context, request, &response);
  {
    absl::MutexLock lock(&cancel_mu_);
    register_context_ = nullptr;
  }
  if (!s.ok()) {
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return absl::UnavailableError(absl::StrCat("scheduler at ", address_, ": ", s.error_message()));
    }
    return FromGrpc(s);
  }
  // From now on every call of this process carries it (TLS channels only).
  if (!response.token().empty()) SetNodeToken(response.token());
  return response;
}

absl::Status SchedulerClient::RegisterAgain(uint64_t seen, absl::Time deadline, const std::string& why) {
  absl::MutexLock once(&register_mu_);
  if (generation_.load() != seen) return absl::OkStatus();  // another thread did it meanwhile
  const std::string me = absl::StrCat(role_ == v1::ROLE_SERVER ? "server " : "worker ", rank_);
  DTRAIN_LOG(WARNING) << "the scheduler at " << address_ << " does not know this node (" << why
                      << "); it restarted? registering again as " << me << " incarnation " << incarnation_;
  v1::RegisterRequest request;
  request.set_role(role_);
  request.set_address(my_address_);
  request.set_requested_rank(rank_);
  request.set_hostname(Hostname());
  request.set_pid(static_cast<int32_t>(::getpid()));
  request.set_num_workers(num_workers_);
  request.set_num_servers(num_servers_);
  request.set_replication(replication_);
  request.set_elastic(elastic_);
  request.set_cluster_spec(cluster_spec_);
  request.set_job_id(job_id_);
  request.set_incarnation(incarnation_);
  if (worker_incarnations_) {
    for (uint64_t inc : worker_incarnations_()) request.add_worker_incarnations(inc);
  }
  const absl::Time start = absl::Now();
  while (true) {
    RegisterResult r = RegisterOnce(request, deadline);
    if (r.ok()) {
      generation_.fetch_add(1);
      DTRAIN_LOG(INFO) << "registered again with the scheduler at " << address_ << " as " << me << " incarnation "
                       << r->incarnation() << " after "
                       << absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(100)));
      return absl::OkStatus();
    }
    const absl::StatusCode code = r.status().code();
    if (code == absl::StatusCode::kCancelled) return r.status();
    if (code != absl::StatusCode::kUnavailable || absl::Now() + kRetryPause >= deadline) {
      return absl::Status(
          code, absl::StrCat("lost the scheduler at ", address_, " and could not register again as ", me, " within ",
                             absl::FormatDuration(deadline - start), ": ", r.status().message()));
    }
    absl::SleepFor(kRetryPause);
  }
}

void SchedulerClient::PauseBeforeRetry(absl::Time until) {
  // A call that failed on a connected channel failed for another reason: a plain pause,
  // so that the retries do not spin.
  const bool was_ready = channel_->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY;
  while (true) {
    const absl::Time now = absl::Now();
    if (now >= until) return;
    {
      absl::MutexLock lock(&cancel_mu_);
      if (closing_) return;
    }
    // In slices, so that the destructor need not wait for the whole pause.
    const absl::Time slice = std::min(until, now + kRetryPause);
    if (was_ready) {
      absl::SleepFor(slice - now);
    } else if (channel_->WaitForConnected(absl::ToChronoTime(slice))) {
      return;  // (re)connected: the caller tries again at once
    }
  }
}

absl::Status SchedulerClient::Retrying(const std::string& what, absl::Time deadline,
                                       const std::function<grpc::Status(absl::Duration left)>& call) {
  absl::Time lost_since = absl::InfiniteFuture();
  grpc::Status last;
  while (true) {
    const uint64_t seen = generation_.load();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      if (lost_since == absl::InfiniteFuture()) {
        return absl::DeadlineExceededError(absl::StrCat(what, ": no time left to call the scheduler at ", address_));
      }
      return absl::UnavailableError(absl::StrCat(what, ": lost the scheduler at ", address_, " for ",
                                                 absl::FormatDuration(absl::Trunc(now - lost_since, absl::Seconds(1))),
                                                 ": ", last.error_message()));
    }
    const grpc::Status s = call(deadline - now);
    if (s.ok() || !SchedulerAway(s)) return FromGrpc(s);
    if (lost_since == absl::InfiniteFuture()) {
      lost_since = now;
      DTRAIN_LOG(WARNING) << what << ": the scheduler at " << address_ << " answered: " << s.error_message()
                          << "; retrying for up to "
                          << absl::FormatDuration(absl::Trunc(deadline - now, absl::Seconds(1)));
    }
    last = s;
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      DTRAIN_RETURN_IF_ERROR(RegisterAgain(seen, deadline, s.error_message()));
    } else {
      PauseBeforeRetry(std::min(absl::Now() + kRetryPause, deadline));
    }
    absl::MutexLock lock(&cancel_mu_);
    if (closing_) return absl::CancelledError("the client is closing");
  }
}

absl::StatusOr<v1::RegisterResponse> SchedulerClient::Register(v1::Role role, const std::string& my_address,
                                                               int requested_rank, int num_workers, int num_servers,
                                                               absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  v1::RegisterRequest request;
  request.set_role(role);
  request.set_address(my_address);
  request.set_requested_rank(requested_rank);
  request.set_hostname(Hostname());
  request.set_pid(static_cast<int32_t>(::getpid()));
  request.set_num_workers(num_workers);
  request.set_num_servers(num_servers);
  request.set_replication(replication_);
  request.set_elastic(elastic_);
  request.set_cluster_spec(cluster_spec_);
  request.set_job_id(job_id_);
  bool told = false;
  RegisterResult r;
  while (true) {
    // The launcher starts everyone at once: RegisterOnce waits for the scheduler to
    // come up rather than failing on the first refused connection.
    r = RegisterOnce(request, deadline);
    if (r.ok()) break;
    if (r.status().code() == absl::StatusCode::kUnavailable && absl::StartsWith(r.status().message(), "cannot reach")) {
      return absl::UnavailableError(absl::StrCat(r.status().message(), " within ", absl::FormatDuration(timeout)));
    }
    // In a running job the scheduler answers UNAVAILABLE for a requested rank a live node
    // holds: most likely the process we replace, not yet declared dead. Before the job
    // starts the holder is a duplicate (ALREADY_EXISTS), and the error comes at once.
    const bool stale_holder = r.status().code() == absl::StatusCode::kUnavailable && requested_rank >= 0;
    if (!stale_holder || absl::Now() + kRetryPause >= deadline) return r.status();
    if (!told) {
      told = true;
      DTRAIN_LOG(WARNING) << r.status().message() << "; retrying until the scheduler declares it dead (up to "
                          << absl::FormatDuration(absl::Trunc(deadline - absl::Now(), absl::Seconds(1))) << ")";
    }
    absl::SleepFor(kRetryPause);
  }
  v1::RegisterResponse& response = *r;
  my_address_ = my_address;
  num_workers_ = num_workers;
  num_servers_ = num_servers;
  role_ = role;
  rank_ = response.rank();
  job_id_ = response.job_id();
  incarnation_ = response.incarnation();
  rejoined_ = response.rejoined();
  return response;
}

void SchedulerClient::SetProgress(int64_t step, double samples_per_sec) {
  step_history_.Set(step, absl::ToUnixMillis(absl::Now()));
  step_.store(step);
  samples_per_sec_.store(samples_per_sec);
}

void SchedulerClient::SetEpochReport(const v1::EpochReport& report) {
  {
    absl::MutexLock lock(&report_mu_);
    epoch_report_ = report;
  }
  if (heartbeat_ != nullptr) heartbeat_->Poke();
}

void SchedulerClient::SetResuming(bool resuming) {
  if (resuming_.exchange(resuming) == resuming) return;
  DTRAIN_LOG(INFO) << (resuming ? "resuming: catching up with the job (the scheduler shows REJOINING)"
                                : "caught up with the job (the scheduler shows ALIVE)");
  if (heartbeat_ != nullptr) heartbeat_->Poke();
}

void SchedulerClient::SetSnapshotReport(const v1::SnapshotReport& report) {
  {
    absl::MutexLock lock(&report_mu_);
    if (snapshot_report_ && snapshot_report_->SerializeAsString() == report.SerializeAsString()) return;
    snapshot_report_ = report;
  }
  if (heartbeat_ != nullptr) heartbeat_->Poke();
}

void SchedulerClient::HeartbeatNow() {
  if (heartbeat_ != nullptr) heartbeat_->Poke();
}

void SchedulerClient::StartHeartbeat(absl::Duration interval, HeartbeatHooks hooks) {
  if (heartbeat_ != nullptr) return;
  heartbeat_ = std::make_unique<Heartbeat>(this, interval, std::move(hooks));
}

absl::Status SchedulerClient::Barrier(const std::string& name, v1::BarrierGroup group, absl::Duration timeout) {
  if (rank_ < 0) return absl::FailedPreconditionError("Barrier before Register");
  v1::BarrierRequest request;
  request.set_name(name);
  request.set_group(group);
  request.set_role(role_);
  request.set_rank(rank_);
  request.set_job_id(job_id_);
  request.set_incarnation(incarnation_);
  return Retrying(absl::StrCat("barrier '", name, "'"), absl::Now() + timeout, [&](absl::Duration left) {
    request.set_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(left)));
    grpc::ClientContext context;
    context.set_deadline(DeadlineAfter(left + kReplyMargin));
    v1::BarrierResponse response;
    return stub_->Barrier(&context, request, &response);
  });
}

absl::Status SchedulerClient::Leave(bool failed, const std::string& reason, absl::Duration timeout) {
  v1::LeaveRequest request;
  request.set_failed(failed);
  request.set_reason(reason);
  return SendLeave(std::move(request), timeout);
}

absl::Status SchedulerClient::AnnounceLeave(const std::string& reason, absl::Duration timeout) {
  v1::LeaveRequest request;
  request.set_reason(reason);
  request.set_elastic_leave(true);
  return SendLeave(std::move(request), timeout);
}

absl::Status SchedulerClient::SendLeave(v1::LeaveRequest request, absl::Duration timeout) {
  if (rank_ < 0) return absl::FailedPreconditionError("Leave before Register");
  request.set_role(role_);
  request.set_rank(rank_);
  request.set_job_id(job_id_);
  request.set_incarnation(incarnation_);
  return Retrying("leave", absl::Now() + timeout, [&](absl::Duration left) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineAfter(left));
    v1::LeaveResponse response;
    return stub_->Leave(&context, request, &response);
  });
}

absl::StatusOr<v1::GetStatusResponse> SchedulerClient::GetStatus(absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(timeout));
  v1::GetStatusResponse response;
  grpc::Status s = stub_->GetStatus(&context, v1::GetStatusRequest(), &response);
  if (!s.ok()) return FromGrpc(s);
  return response;
}

}  // namespace dtrain
