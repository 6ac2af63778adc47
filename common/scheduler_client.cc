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

// The heartbeat thread and what it shares with the destructor.
struct SchedulerClient::Heartbeat {
  absl::Mutex mu;
  absl::CondVar cv;
  bool stop ABSL_GUARDED_BY(mu) = false;
  bool stream_done ABSL_GUARDED_BY(mu) = false;     // the current stream's reader has ended
  grpc::ClientContext* context ABSL_GUARDED_BY(mu) = nullptr;  // the current stream's
  std::atomic<bool> shutdown_seen{false};
  std::thread thread;
};

SchedulerClient::SchedulerClient(const std::string& address)
    : address_(address), channel_(MakeChannel(address)), stub_(v1::Scheduler::NewStub(channel_)) {}

SchedulerClient::~SchedulerClient() {
  if (heartbeat_ == nullptr) return;
  {
    absl::MutexLock lock(&heartbeat_->mu);
    heartbeat_->stop = true;
    // Cancelling unblocks the reader; the writer wakes from the condition variable.
    if (heartbeat_->context != nullptr) heartbeat_->context->TryCancel();
    heartbeat_->cv.SignalAll();
  }
  heartbeat_->thread.join();
}

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
  return response;
}

void SchedulerClient::SetProgress(int64_t step, double samples_per_sec) {
  step_.store(step);
  samples_per_sec_.store(samples_per_sec);
}

void SchedulerClient::StartHeartbeat(absl::Duration interval, HeartbeatHooks hooks) {
  if (heartbeat_ != nullptr) return;
  heartbeat_ = std::make_unique<Heartbeat>();
  Heartbeat* hb = heartbeat_.get();
  auto shutdown_once = [hb, hooks](const std::string& reason) {
    if (hb->shutdown_seen.exchange(true)) return;
    DTRAIN_LOG(INFO) << "the scheduler ended the job: " << reason;
    if (hooks.on_shutdown) hooks.on_shutdown(reason);
  };

  hb->thread = std::thread([this, hb, interval, hooks, shutdown_once] {
    absl::Time broken_since = absl::InfiniteFuture();  // when the stream last broke
    while (true) {
      grpc::ClientContext context;
      {
        absl::MutexLock lock(&hb->mu);
        if (hb->stop) break;
        hb->context = &context;
        hb->stream_done = false;
      }
      auto stream = stub_->Heartbeat(&context);
      std::thread reader([&] {
        v1::HeartbeatResponse response;
        while (stream->Read(&response)) {
          for (const auto& node : response.dead()) {
            if (hooks.on_dead) hooks.on_dead(node);
          }
          if (response.shutdown()) shutdown_once(response.reason());
        }
        absl::MutexLock lock(&hb->mu);
        hb->stream_done = true;
        hb->cv.SignalAll();
      });

      // Writer: one request now (so the scheduler sees us ALIVE at once), then one per interval.
      bool wrote = false;
      while (true) {
        v1::HeartbeatRequest request;
        request.set_role(role_);
        request.set_rank(rank_);
        request.set_step(step_.load());
        request.set_samples_per_sec(samples_per_sec_.load());
        if (!stream->Write(request)) break;
        if (!wrote && channel_->GetState(false) == GRPC_CHANNEL_READY) {
          wrote = true;
          broken_since = absl::InfiniteFuture();
        }
        absl::MutexLock lock(&hb->mu);
        const absl::Time next = absl::Now() + interval;
        while (!hb->stop && !hb->stream_done && absl::Now() < next) hb->cv.WaitWithDeadline(&hb->mu, next);
        if (hb->stop || hb->stream_done) break;
      }
      context.TryCancel();
      reader.join();
      grpc::Status status = stream->Finish();
      bool stop;
      {
        absl::MutexLock lock(&hb->mu);
        hb->context = nullptr;
        stop = hb->stop;
      }
      if (stop || hb->shutdown_seen) break;

      // The stream broke under us: retry while the scheduler may still count us alive.
      const absl::Time now = absl::Now();
      if (broken_since == absl::InfiniteFuture()) {
        broken_since = now;
        DTRAIN_LOG(WARNING) << "heartbeat stream to the scheduler at " << address_
                            << " broke: " << status.error_message() << "; reconnecting";
      }
      if (now - broken_since >= hooks.reconnect_for) {
        shutdown_once(absl::StrCat("lost the scheduler at ", address_, " for ",
                                   absl::FormatDuration(hooks.reconnect_for)));
        break;
      }
      absl::MutexLock lock(&hb->mu);
      const absl::Time retry = now + std::min(interval, absl::Seconds(1));
      while (!hb->stop && absl::Now() < retry) hb->cv.WaitWithDeadline(&hb->mu, retry);
    }
  });
}

absl::Status SchedulerClient::Barrier(const std::string& name, v1::BarrierGroup group, absl::Duration timeout) {
  if (rank_ < 0) return absl::FailedPreconditionError("Barrier before Register");
  v1::BarrierRequest request;
  request.set_name(name);
  request.set_group(group);
  request.set_role(role_);
  request.set_rank(rank_);
  request.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
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
