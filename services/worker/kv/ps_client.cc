#include "services/worker/kv/ps_client.h"

#include "services/worker/kv/key_request_proto.h"
#include "services/worker/kv/ps_client_impl.h"

namespace dtrain::worker {

PsClient::PsClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const std::string& address, int server_rank,
                                                            int worker_rank, absl::Duration connect_timeout) {
  auto impl = std::make_unique<Impl>();
  impl->address = address;
  impl->server_rank = server_rank;
  impl->worker_rank = worker_rank;
  impl->channel = MakeChannel(address);
  if (connect_timeout > absl::ZeroDuration() && !impl->channel->WaitForConnected(DeadlineAfter(connect_timeout))) {
    return absl::UnavailableError(absl::StrCat("cannot reach parameter server ", server_rank, " at ", address,
                                               " within ", absl::FormatDuration(connect_timeout)));
  }
  impl->stub = v1::ParameterServer::NewStub(impl->channel);
  // The stream speaks raw buffers (tensor_codec.h); the unary calls use the stub.
  impl->stream.reset(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
      impl->channel.get(),
      grpc::internal::RpcMethod(ps_client_internal::kPushPullMethod, grpc::internal::RpcMethod::BIDI_STREAMING),
      &impl->stream_ctx));
  Impl* raw = impl.get();
  impl->reader = std::thread([raw] { raw->ReaderLoop(); });
  impl->writer = std::thread([raw] { raw->WriterLoop(); });
  return std::unique_ptr<PsClient>(new PsClient(std::move(impl)));
}

PsClient::~PsClient() {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->closing = true;
  }
  impl_->stream_ctx.TryCancel();
  impl_->writer.join();
  impl_->reader.join();
  impl_->stream.reset();
  // Gradients lent to gRPC must be back before the caller may free them.
  absl::MutexLock lock(&impl_->lent->mu);
  auto all_back = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return impl_->lent->lent.empty(); };
  if (!impl_->lent->mu.AwaitWithTimeout(absl::Condition(&all_back), ps_client_internal::kReleaseAfterCancel)) {
    DTRAIN_LOG(ERROR) << impl_->Who() << ": gRPC kept gradient buffers after the stream closed; stopping";
    std::abort();
  }
}

PsClient::Ticket PsClient::Submit(const KeyRequest& r) {
  using Target = KeyRequest::Target;
  const bool weights = r.target == Target::kWeights || r.target == Target::kExact || r.target == Target::kDelta;
  v1::PushPullRequest req =
      KeyRequestProto(r, {impl_->worker_rank, impl_->job_id, impl_->incarnation,
                          impl_->pull_timeout_ms.load(std::memory_order_relaxed), impl_->pull_codec != nullptr});
  Impl::Pending p{req.op(), r.key, weights ? r.out : nullptr, r.numel, r.version_out};
  if (absl::Status s = ValidateKeyRequest(r); !s.ok()) return impl_->Refuse(std::move(p), impl_->Annotate(s, "Submit"));
  if (req.pull_delta()) {
    p.delta_ok = true;
    p.step = r.step_or_version;
  }
  return impl_->Submit(std::move(req), std::move(p), r.op == KeyRequest::Op::kPull ? nullptr : &r.payload);
}

void PsClient::SetPullCompression(kv::CompressionType type) { impl_->pull_codec = kv::MakeCodec({type, 1.0f}); }

void PsClient::SetPullTimeout(absl::Duration timeout) {
  impl_->pull_timeout_ms.store(std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout)), std::memory_order_relaxed);
}

absl::Status PsClient::Wait(Ticket ticket, absl::Time deadline) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->tickets.find(ticket);
  if (it == impl_->tickets.end()) {
    return absl::InvalidArgumentError(absl::StrCat("ticket ", ticket, " unknown or already waited for"));
  }
  Impl::Pending* p = &it->second;
  auto finished = [p] { return p->done && !p->copying; };
  impl_->mu.AwaitWithDeadline(absl::Condition(&finished), deadline);
  // A copy in progress ends within a memcpy; the caller's buffer must not be
  // released under it.
  auto not_copying = [p] { return !p->copying; };
  impl_->mu.Await(absl::Condition(&not_copying));
  absl::Status result;
  if (p->done) {
    result = p->status;
  } else {
    const double waited = absl::ToDoubleSeconds(absl::Now() - p->sent);
    result = absl::DeadlineExceededError(absl::StrFormat("%s: no answer to %s of key %d within %.*f s", impl_->Who(),
                                                         ps_client_internal::OpName(p->op), p->key, waited < 10 ? 1 : 0,
                                                         waited));
  }
  impl_->tickets.erase(it);
  impl_->mu.Unlock();
  // The answer can overtake gRPC's release of the pushed gradient by a moment.
  impl_->AwaitReturned(ticket, std::max(deadline, absl::Now() + absl::Seconds(1)));
  impl_->mu.Lock();
  return result;
}

bool PsClient::WaitUntil(Ticket ticket, absl::Time until) {
  absl::MutexLock lock(&impl_->mu);
  auto it = impl_->tickets.find(ticket);
  if (it == impl_->tickets.end()) return true;
  Impl::Pending* p = &it->second;
  auto finished = [p] { return p->done && !p->copying; };
  return impl_->mu.AwaitWithDeadline(absl::Condition(&finished), until);
}

absl::Status PsClient::WaitAll(absl::Time deadline) {
  std::vector<Ticket> ids;
  {
    absl::MutexLock lock(&impl_->mu);
    ids.reserve(impl_->tickets.size());
    for (const auto& entry : impl_->tickets) ids.push_back(entry.first);
  }
  std::sort(ids.begin(), ids.end());
  absl::Status first;
  for (Ticket id : ids) {
    absl::Status s = Wait(id, deadline);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

std::vector<PsClient::JoinNotice> PsClient::TakeJoinNotices() {
  absl::MutexLock lock(&impl_->mu);
  std::vector<JoinNotice> out;
  out.swap(impl_->joins);
  return out;
}

const std::string& PsClient::address() const { return impl_->address; }
int PsClient::server_rank() const { return impl_->server_rank; }
int64_t PsClient::bytes_pushed() const { return impl_->bytes_pushed.load(std::memory_order_relaxed); }
int64_t PsClient::bytes_pushed_uncompressed() const {
  return impl_->bytes_pushed_uncompressed.load(std::memory_order_relaxed);
}
int64_t PsClient::bytes_pulled() const { return impl_->bytes_pulled.load(std::memory_order_relaxed); }
int64_t PsClient::bytes_pulled_uncompressed() const {
  return impl_->bytes_pulled_uncompressed.load(std::memory_order_relaxed);
}

}  // namespace dtrain::worker
