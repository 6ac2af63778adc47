// The Heartbeat stream as a gRPC callback reactor: one operation in flight at a time,
// a read, or the write of its answer. What a heartbeat means is SchedulerService's
// (OpenHeartbeat, AnswerHeartbeat, FinishHeartbeat); this file only moves the messages.
//
// No wait here needs a deadline of its own: nothing blocks. A stream that breaks (the
// node died, its connection dropped, the server shuts down) fails the read or write in
// flight, and the stream finishes as the sync handler did when Read returned false.
#include "common/grpc_util.h"
#include "services/scheduler/scheduler_service.h"

namespace dtrain::scheduler {

class SchedulerService::HeartbeatReactor final
    : public grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse> {
 public:
  // Deletes itself when the stream is done.
  HeartbeatReactor(SchedulerService* service, const grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(service_->FinishHeartbeat(stream_));  // the node stopped sending
    if (!stream_.opened) {
      if (absl::Status denied = service_->OpenHeartbeat(*context_, request_, &stream_); !denied.ok()) {
        return Finish(ToGrpc(denied));
      }
    }
    response_.Clear();
    const bool send = service_->AnswerHeartbeat(request_, &stream_, &response_);
    // A node this scheduler does not know ends its stream NOT_FOUND at once.
    if (!stream_.unknown.ok()) return Finish(service_->FinishHeartbeat(stream_));
    if (send) return StartWrite(&response_);
    Answered(true);
  }

  void OnWriteDone(bool ok) override { Answered(ok); }

  void OnDone() override { delete this; }

 private:
  // The answer is out (`written`: or needed none): read the next heartbeat, unless the
  // stream broke or the process was fenced (it heard why; the stream ends with that).
  void Answered(bool written) {
    if (!written || stream_.Fenced()) return Finish(service_->FinishHeartbeat(stream_));
    StartRead(&request_);
  }

  SchedulerService* const service_;
  const grpc::CallbackServerContext* const context_;
  HeartbeatStream stream_;
  v1::HeartbeatRequest request_;    // the read in flight
  v1::HeartbeatResponse response_;  // the write in flight
};

grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse>* SchedulerService::Heartbeat(
    grpc::CallbackServerContext* context) {
  return new HeartbeatReactor(this, context);
}

}  // namespace dtrain::scheduler
