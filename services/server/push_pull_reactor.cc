#include "services/server/push_pull_reactor.h"

#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/kv/message_batch.h"
#include "common/kv/tensor_codec.h"
#include "common/log.h"

namespace dtrain::server {

PushPullReactor::PushPullReactor(kv::ShardStore* store, const StreamOptions& options)
    : store_(store),
      options_(options),
      metrics_(options.metrics),
      box_(std::make_shared<Outbox>()),
      handler_(store, options, box_) {
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
  // Several requests queued together at the worker come as one batch (message_batch.h).
  // Its parts are handled one by one as single requests are, stopping where the stream
  // is full: what is left waits (unread, in effect) until answers have gone out.
  constexpr size_t kMaxBatchParts = 4096;
  if (kv::IsBatch(&request_, v1::PushPullRequest::kBatchFieldNumber)) {
    std::vector<grpc::ByteBuffer> parts;
    const absl::Status split =
        kv::SplitBatch(&request_, v1::PushPullRequest::kBatchFieldNumber, kMaxBatchParts, &parts);
    request_.Clear();
    if (!split.ok()) {
      // The batch's request ids are unknown past the fault: none of it is handled.
      DTRAIN_LOG(WARNING) << "malformed batch of PushPull requests: " << split.message();
      if (metrics_ != nullptr) metrics_->RequestFailed();
      parts.clear();
    }
    for (grpc::ByteBuffer& part : parts) unread_.push_back(std::move(part));
  } else {
    unread_.push_back(std::move(request_));
    request_.Clear();
  }
  HandleUnread();
}

void PushPullReactor::HandleUnread() {
  while (!unread_.empty()) {
    {
      absl::MutexLock lock(&box_->mu);
      if (Full()) {
        // OnWriteDone comes back here once answers have gone out (OnCancel ends the stream).
        box_->read_paused = true;
        return;
      }
    }
    grpc::ByteBuffer next = std::move(unread_.front());
    unread_.pop_front();
    if (!HandleRequest(next)) {  // refused: the stream is finishing
      unread_.clear();
      return;
    }
  }
  ReadNext();
}

bool PushPullReactor::HandleRequest(grpc::ByteBuffer& message) {
  v1::PushPullRequest req;
  int64_t payload_bytes = -1;
  // The codec has checked `size` against the bytes received and the cap before
  // this allocates; a request that is not (yet) a push has its payload skipped.
  payload_taken_ = -1;
  const absl::Status decoded = kv::DecodeWithPayload(
      &message, &req, v1::PushPullRequest::kDataFieldNumber,
      [this](const google::protobuf::MessageLite& header, size_t size) -> char* {
        const auto op = static_cast<const v1::PushPullRequest&>(header).op();
        if (op != v1::OP_PUSH && op != v1::OP_PUSH_PULL) return nullptr;
        payload_.resize((size + sizeof(float) - 1) / sizeof(float));
        payload_taken_ = static_cast<int64_t>(size);
        return reinterpret_cast<char*>(payload_.data());
      },
      &payload_bytes, options_.request_limits.max_payload_bytes);
  if (decoded.ok()) {
    {
      absl::MutexLock lock(&box_->mu);
      ++box_->unanswered;
      if (req.batch_answers()) box_->batches = true;
    }
    const absl::Status refusal =
        handler_.Handle(req, payload_.data(), payload_bytes, payload_bytes > 0 && payload_taken_ == payload_bytes);
    if (payload_.capacity() * sizeof(float) > kv::kKeepPayloadBytes) std::vector<float>().swap(payload_);
    bool refused = false;
    {
      absl::MutexLock lock(&box_->mu);
      if (!refusal.ok() && box_->refused.ok()) box_->refused = refusal;
      refused = !box_->refused.ok();
      if (refused) box_->reads_done = true;  // no read follows to say so
    }
    if (refused) {
      DropParkedPulls();
      MaybeFinish();
      return false;
    }
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
      kv::SetStatus(absl::InvalidArgumentError(absl::StrCat("malformed request: ", decoded.message())), &resp);
      Send(box_, resp);
    }
  }
  return true;
}

bool PushPullReactor::Full() const {
  return box_->unanswered + static_cast<int64_t>(box_->queue.size()) >= options_.max_pending_requests ||
         box_->queued_bytes >= options_.max_queued_bytes;
}

void PushPullReactor::ReadNext() {
  {
    absl::MutexLock lock(&box_->mu);
    if (Full()) {
      // OnWriteDone resumes once answers have gone out (OnCancel ends the stream).
      box_->read_paused = true;
      return;
    }
  }
  StartRead(&request_);
}

void PushPullReactor::DropParkedPulls() {
  {
    absl::MutexLock lock(&box_->mu);
    if (box_->unanswered == 0) return;  // nothing of ours can be parked
  }
  const int64_t dropped = store_->DropPulls(handler_.owner());
  if (dropped > 0) DTRAIN_LOG(INFO) << "PushPull stream gone: dropped its " << dropped << " parked pulls";
}

grpc::ByteBuffer PushPullReactor::Outbox::TakeWrite() {
  using kv::kMaxBatchBytes;
  constexpr size_t kMaxBatchParts = 1024;
  grpc::ByteBuffer first = queue.Pop();
  size_t bytes = first.Length();
  if (!batches || queue.empty() || bytes + queue.FrontLength() > kMaxBatchBytes) {
    queued_bytes -= static_cast<int64_t>(bytes);
    return first;
  }
  std::vector<grpc::ByteBuffer> parts;
  parts.push_back(std::move(first));
  while (!queue.empty() && parts.size() < kMaxBatchParts && bytes + queue.FrontLength() <= kMaxBatchBytes) {
    bytes += queue.FrontLength();
    parts.push_back(queue.Pop());
  }
  queued_bytes -= static_cast<int64_t>(bytes);
  return kv::EncodeBatch(parts, v1::PushPullResponse::kBatchFieldNumber);
}

void PushPullReactor::Outbox::Send(const v1::PushPullResponse& resp) {
  PushPullReactor::Send(shared_from_this(), resp);
}

kv::AnswerSink::DataAnswer PushPullReactor::Outbox::Prepare(const char* data, size_t bytes) {
  grpc_slice copy = grpc_slice_malloc(bytes);
  if (bytes > 0) std::memcpy(GRPC_SLICE_START_PTR(copy), data, bytes);
  return
      [box = shared_from_this(), payload = grpc::Slice(copy, grpc::Slice::STEAL_REF)](const v1::PushPullResponse& r) {
        v1::PushPullResponse said = r;  // the header only: the weights are `payload`
        said.set_reads_batches(true);
        PushPullReactor::Send(box, said.key(),
                              kv::EncodeWithPayload(said, v1::PushPullResponse::kDataFieldNumber, payload));
      };
}

void PushPullReactor::Send(const std::shared_ptr<Outbox>& box, const v1::PushPullResponse& resp) {
  v1::PushPullResponse said = resp;
  said.set_reads_batches(true);
  Send(box, said.key(), kv::EncodeMessage(said));
}

void PushPullReactor::Send(const std::shared_ptr<Outbox>& box, uint64_t key, grpc::ByteBuffer resp) {
  PushPullReactor* reactor = nullptr;
  {
    absl::MutexLock lock(&box->mu);
    if (!box->alive) return;  // the stream is finished; nobody is listening
    --box->unanswered;
    if (box->broken) return;
    box->queued_bytes += static_cast<int64_t>(resp.Length());
    box->queue.Push(key, std::move(resp));
    if (box->writing) return;  // OnWriteDone picks it up
    box->writing = true;
    reactor = box->reactor;
    reactor->writing_ = box->TakeWrite();
  }
  // Not under box->mu: gRPC may run the reaction inline. While `writing` is set the
  // stream cannot finish, so `reactor` stays valid.
  reactor->StartWrite(&reactor->writing_);
}

void PushPullReactor::OnWriteDone(bool ok) {
  bool next = false;
  bool resume_reading = false;
  {
    absl::MutexLock lock(&box_->mu);
    box_->writing = false;
    if (!ok) {
      box_->broken = true;
      box_->queue.clear();
      box_->queued_bytes = 0;
      if (box_->read_paused) box_->reads_done = true;  // no read in flight to say so
    } else if (!box_->queue.empty()) {
      writing_ = box_->TakeWrite();
      box_->writing = next = true;
    }
    if (ok && box_->read_paused && !Full()) {
      box_->read_paused = false;
      resume_reading = true;
    }
  }
  if (!ok) DropParkedPulls();
  if (resume_reading) HandleUnread();
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
    box_->queued_bytes = 0;
    // A paused stream has no read in flight to report the end.
    if (box_->read_paused) box_->reads_done = true;
  }
  // Nobody will read what its parked pulls would answer: let them go now, not at
  // their deadline.
  DropParkedPulls();
  MaybeFinish();
}

void PushPullReactor::MaybeFinish() {
  bool broken = false;
  absl::Status refused;
  {
    absl::MutexLock lock(&box_->mu);
    if (!box_->alive || box_->writing || !box_->reads_done) return;
    refused = box_->refused;
    // A client that half-closed still gets the answers to what it asked.
    if (!box_->broken && (box_->unanswered > 0 || !box_->queue.empty())) return;
    box_->alive = false;
    broken = box_->broken;
    box_->queue.clear();
    box_->queued_bytes = 0;
  }
  if (broken) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled"));
  } else {
    Finish(ToGrpc(refused));  // OK unless the stream was refused
  }
}

void PushPullReactor::OnDone() {
  // A pull parked by a reaction that ran alongside OnCancel is caught here.
  DropParkedPulls();
  {
    absl::MutexLock lock(&box_->mu);
    box_->alive = false;
    box_->reactor = nullptr;
  }
  delete this;
}

}  // namespace dtrain::server
