#include "common/scheduler_client.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "common/log.h"

namespace dtrain {
namespace {

// The scheduler answers a blocking call (Register, Barrier) up to a second before
// the call's gRPC deadline; this slack lets its error, which names the missing
// nodes, arrive instead of gRPC's bare "Deadline Exceeded".
constexpr absl::Duration kReplyMargin = absl::Seconds(1);

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
      const grpc::Status status = RunStream(context, &broken_since);
      {
        absl::MutexLock lock(&mu_);
        context_ = nullptr;
        if (stop_) return;
      }
      if (shutdown_seen_) return;

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
      absl::MutexLock lock(&mu_);
      const absl::Time retry = now + std::min(interval_, absl::Seconds(1));
      while (!stop_ && absl::Now() < retry) cv_.WaitWithDeadline(&mu_, retry);
    }
  }

  // One stream, until it breaks or the destructor stops it; returns how it ended.
  grpc::Status RunStream(grpc::ClientContext& context, absl::Time* broken_since) {
    std::unique_ptr<Stream> stream = client_->stub_->Heartbeat(&context);
    std::thread reader([&] { Read(*stream); });
    Write(*stream, broken_since);
    context.TryCancel();
    reader.join();
    return stream->Finish();
  }

  // The scheduler's news: dead nodes, and the end of the job.
  void Read(Stream& stream) {
    v1::HeartbeatResponse response;
    while (stream.Read(&response)) {
      for (const auto& node : response.dead()) {
        if (hooks_.on_dead) hooks_.on_dead(node);
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
    while (true) {
      v1::HeartbeatRequest request;
      request.set_role(client_->role_);
      request.set_rank(client_->rank_);
      request.set_step(client_->step_.load());
      request.set_samples_per_sec(client_->samples_per_sec_.load());
      request.set_job_id(client_->job_id_);
      request.set_incarnation(client_->incarnation_);
      if (!stream.Write(request)) return;
      if (!wrote && client_->channel_->GetState(false) == GRPC_CHANNEL_READY) {
        wrote = true;
        *broken_since = absl::InfiniteFuture();
      }
      absl::MutexLock lock(&mu_);
      const absl::Time next = absl::Now() + interval_;
      while (!stop_ && !stream_done_ && absl::Now() < next) cv_.WaitWithDeadline(&mu_, next);
      if (stop_ || stream_done_) return;
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
  bool stream_done_ ABSL_GUARDED_BY(mu_) = false;                 // the current stream's reader has ended
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the current stream's
  std::atomic<bool> shutdown_seen_{false};
  std::thread thread_;  // last: starts once everything above is set
};

SchedulerClient::SchedulerClient(const std::string& address)
    : address_(address), channel_(MakeChannel(address)), stub_(v1::Scheduler::NewStub(channel_)) {}

// Stops the heartbeat before the stub and channel it uses go.
SchedulerClient::~SchedulerClient() { heartbeat_.reset(); }

absl::StatusOr<v1::RegisterResponse> SchedulerClient::Register(v1::Role role, const std::string& my_address,
                                                               int requested_rank, int num_workers,
                                                               int num_servers, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // The launcher starts everyone at once: wait for the scheduler to come up
  // rather than failing on the first refused connection.
  if (!channel_->WaitForConnected(absl::ToChronoTime(deadline))) {
    return absl::UnavailableError(absl::StrCat("cannot reach the scheduler at ", address_, " within ",
                                               absl::FormatDuration(timeout)));
  }
  v1::RegisterRequest request;
  request.set_role(role);
  request.set_address(my_address);
  request.set_requested_rank(requested_rank);
  request.set_hostname(Hostname());
  request.set_pid(static_cast<int32_t>(::getpid()));
  request.set_num_workers(num_workers);
  request.set_num_servers(num_servers);
  request.set_job_id(job_id_);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline + kReplyMargin));
  context.set_wait_for_ready(true);
  v1::RegisterResponse response;
  grpc::Status s = stub_->Register(&context, request, &response);
  if (!s.ok()) {
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return absl::UnavailableError(absl::StrCat("scheduler at ", address_, ": ", s.error_message()));
    }
    return FromGrpc(s);
  }
  role_ = role;
  rank_ = response.rank();
  job_id_ = response.job_id();
  incarnation_ = response.incarnation();
  rejoined_ = response.rejoined();
  return response;
}

void SchedulerClient::SetProgress(int64_t step, double samples_per_sec) {
  step_.store(step);
  samples_per_sec_.store(samples_per_sec);
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
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  request.set_job_id(job_id_);
  request.set_incarnation(incarnation_);
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(timeout + kReplyMargin));
  v1::BarrierResponse response;
  return FromGrpc(stub_->Barrier(&context, request, &response));
}

absl::Status SchedulerClient::Leave(bool failed, const std::string& reason, absl::Duration timeout) {
  if (rank_ < 0) return absl::FailedPreconditionError("Leave before Register");
  v1::LeaveRequest request;
  request.set_role(role_);
  request.set_rank(rank_);
  request.set_failed(failed);
  request.set_reason(reason);
  request.set_job_id(job_id_);
  request.set_incarnation(incarnation_);
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(timeout));
  v1::LeaveResponse response;
  return FromGrpc(stub_->Leave(&context, request, &response));
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
