#include "services/server/push_pull_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/kv/tensor_codec.h"
#include "common/log.h"

namespace dtrain::server {
namespace {

void SetStatus(const absl::Status& s, v1::PushPullResponse* resp) {
  resp->set_code(static_cast<int32_t>(s.code()));
  resp->set_message(std::string(s.message()));
}

// Per-request checks the store cannot make (it sees floats, not bytes).
absl::Status CheckPayload(const v1::PushPullRequest& req, int64_t payload_bytes) {
  const size_t data_size = payload_bytes < 0 ? 0 : static_cast<size_t>(payload_bytes);
  const bool push = req.op() == v1::OP_PUSH || req.op() == v1::OP_PUSH_PULL;
  if (push ? req.dtype() != v1::DTYPE_FLOAT32
           : req.dtype() != v1::DTYPE_FLOAT32 && req.dtype() != v1::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat("key ", req.key(), ": dtype must be DTYPE_FLOAT32, got ",
                                                   v1::DType_Name(req.dtype()), " (", req.dtype(), ")"));
  }
  if (push && data_size % sizeof(float) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("push of key ", req.key(), ": data has ", data_size,
                                                   " bytes, not a whole number of float32s"));
  }
  if (!push && data_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("pull of key ", req.key(), " carries ", data_size,
                                                   " bytes of data; only pushes do"));
  }
  return absl::OkStatus();
}

}  // namespace

PushPullReactor::PushPullReactor(kv::ShardStore* store, absl::Duration sync_timeout,
                                 server::ServerMetrics* metrics)
    : store_(store), sync_timeout_(sync_timeout), metrics_(metrics), box_(std::make_shared<Outbox>()) {
  {
    absl::MutexLock lock(&box_->mu);
    box_->reactor = this;
  }
  StartRead(&request_);
}

void PushPullReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client half-closed, or the call is gone
    {
      absl::MutexLock lock(&box_->mu);
      box_->reads_done = true;
    }
    MaybeFinish();
    return;
  }
  v1::PushPullRequest req;
  int64_t payload_bytes = -1;
  const absl::Status decoded = kv::DecodeWithPayload(
      &request_, &req, v1::PushPullRequest::kDataFieldNumber,
      [this](const google::protobuf::MessageLite&, size_t size) {
        payload_.resize((size + sizeof(float) - 1) / sizeof(float));
        return reinterpret_cast<char*>(payload_.data());
      },
      &payload_bytes);
  request_.Clear();
  if (decoded.ok()) {
    Handle(req, payload_bytes);
  } else {
    // Without a request id there is nobody to answer: say so and go on reading.
    DTRAIN_LOG(WARNING) << "undecodable PushPull request " << req.request_id() << ": " << decoded.message();
    if (metrics_ != nullptr) metrics_->RequestFailed();
    if (req.request_id() != 0) {
      {
        absl::MutexLock lock(&box_->mu);
        ++box_->unanswered;
      }
      v1::PushPullResponse resp;
      resp.set_request_id(req.request_id());
      SetStatus(absl::InvalidArgumentError(absl::StrCat("malformed request: ", decoded.message())), &resp);
      Send(box_, resp);
    }
  }
  StartRead(&request_);
}

void PushPullReactor::Handle(const v1::PushPullRequest& req, int64_t payload_bytes) {
  {
    absl::MutexLock lock(&box_->mu);
    ++box_->unanswered;
  }
  v1::PushPullResponse resp;
  resp.set_request_id(req.request_id());
  resp.set_key(req.key());
  server::ServerMetrics* const metrics = metrics_;
  if (req.op() != v1::OP_PUSH && req.op() != v1::OP_PULL && req.op() != v1::OP_PUSH_PULL) {
    if (metrics != nullptr) metrics->RequestFailed();
    SetStatus(absl::InvalidArgumentError(absl::StrCat("request ", req.request_id(), ": unknown op ", req.op(),
                                                      " (want OP_PUSH, OP_PULL or OP_PUSH_PULL)")),
              &resp);
    Send(box_, resp);
    return;
  }
  if (absl::Status s = CheckPayload(req, payload_bytes); !s.ok()) {
    if (metrics != nullptr) metrics->RequestFailed();
    SetStatus(s, &resp);
    Send(box_, resp);
    return;
  }
  int64_t min_version = req.min_version();
  if (req.op() != v1::OP_PULL) {
    if (metrics != nullptr) metrics->PushReceived(std::max<int64_t>(payload_bytes, 0));
    absl::Status s = store_->Push(req.worker_rank(), req.step(), req.key(), payload_.data(),
                                  std::max<int64_t>(payload_bytes, 0) / static_cast<int64_t>(sizeof(float)));
    if (!s.ok() || req.op() == v1::OP_PUSH) {
      if (!s.ok() && metrics != nullptr) metrics->RequestFailed();
      SetStatus(s, &resp);
      Send(box_, resp);
      return;
    }
    // The weights after this step's update (async pulls answer at once anyway).
    min_version = req.step() + 1;
  }
  // The worker may ask for a shorter wait than ours, so that the server's answer,
  // which names the missing workers, beats the worker's own deadline.
  const absl::Duration wait = req.timeout_ms() > 0 ? absl::Milliseconds(req.timeout_ms()) : sync_timeout_;
  if (metrics != nullptr) metrics->PullRequested();
  // `metrics` outlives every stream and parked pull: the server is shut down before it.
  store_->Pull(req.worker_rank(), req.key(), min_version, absl::Now() + wait,
               [box = box_, resp = std::move(resp), metrics](const absl::Status& s, int64_t version,
                                                             const float* data, int64_t numel) mutable {
                 // Runs under the key's lock: copy the weights out and queue, nothing more.
                 SetStatus(s, &resp);
                 if (!s.ok()) {
                   if (metrics != nullptr) metrics->RequestFailed();
                   Send(box, resp);
                   return;
                 }
                 if (metrics != nullptr) metrics->PullAnswered(numel * static_cast<int64_t>(sizeof(float)));
                 resp.set_version(version);
                 Send(box, kv::EncodeWithPayload(resp, v1::PushPullResponse::kDataFieldNumber,
                                                 kv::CopyToSlice(data, numel)));
               });
}

void PushPullReactor::Send(const std::shared_ptr<Outbox>& box, const v1::PushPullResponse& resp) {
  Send(box, kv::EncodeMessage(resp));
}

void PushPullReactor::Send(const std::shared_ptr<Outbox>& box, grpc::ByteBuffer resp) {
  PushPullReactor* reactor = nullptr;
  {
    absl::MutexLock lock(&box->mu);
    if (!box->alive) return;  // the stream is finished; nobody is listening
    --box->unanswered;
    if (box->broken) return;
    box->queue.push_back(std::move(resp));
    if (box->writing) return;  // OnWriteDone picks it up
    box->writing = true;
    reactor = box->reactor;
    reactor->writing_ = std::move(box->queue.front());
    box->queue.pop_front();
  }
  // Not under box->mu: gRPC may run the reaction inline. While `writing` is set the
  // stream cannot finish, so `reactor` stays valid.
  reactor->StartWrite(&reactor->writing_);
}

void PushPullReactor::OnWriteDone(bool ok) {
  bool next = false;
  {
    absl::MutexLock lock(&box_->mu);
    box_->writing = false;
    if (!ok) {
      box_->broken = true;
      box_->queue.clear();
    } else if (!box_->queue.empty()) {
      writing_ = std::move(box_->queue.front());
      box_->queue.pop_front();
      box_->writing = next = true;
    }
  }
  if (next) {
    StartWrite(&writing_);
  } else {
    MaybeFinish();
  }
}

void PushPullReactor::OnCancel() {
  {
    absl::MutexLock lock(&box_->mu);
    box_->broken = true;
    box_->queue.clear();
  }
  MaybeFinish();
}

void PushPullReactor::MaybeFinish() {
  bool broken = false;
  {
    absl::MutexLock lock(&box_->mu);
    if (!box_->alive || box_->writing || !box_->reads_done) return;
    // A client that half-closed still gets the answers to what it asked.
    if (!box_->broken && (box_->unanswered > 0 || !box_->queue.empty())) return;
    box_->alive = false;
    broken = box_->broken;
    box_->queue.clear();
  }
  Finish(broken ? grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled") : grpc::Status::OK);
}

void PushPullReactor::OnDone() {
  {
    absl::MutexLock lock(&box_->mu);
    box_->alive = false;
    box_->reactor = nullptr;
  }
  delete this;
}

}  // namespace dtrain::server
