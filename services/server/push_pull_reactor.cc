#include "services/server/push_pull_reactor.h"

#include <atomic>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/kv/tensor_codec.h"
#include "common/log.h"
#include "common/kv/finite_check.h"
#include "services/server/node_checks.h"
#include "services/server/replica_catch_up.h"

namespace dtrain::server {
namespace {

void SetStatus(const absl::Status& s, v1::PushPullResponse* resp) {
  resp->set_code(static_cast<int32_t>(s.code()));
  resp->set_message(std::string(s.message()));
}

// A key is at most a 4 MB chunk (common/kv/placement.h): a stream keeps a buffer that
// size between requests, and lets a larger one go once its request is handled.
constexpr size_t kKeepPayloadBytes = 8 << 20;

uint64_t NextOwner() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

PushPullReactor::PushPullReactor(kv::ShardStore* store, const StreamOptions& options)
    : store_(store),
      options_(options),
      metrics_(options.metrics),
      owner_(NextOwner()),
      box_(std::make_shared<Outbox>()) {
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
  // The codec has checked `size` against the bytes received and the cap before
  // this allocates; a request that is not (yet) a push has its payload skipped.
  payload_taken_ = -1;
  const absl::Status decoded = kv::DecodeWithPayload(
      &request_, &req, v1::PushPullRequest::kDataFieldNumber,
      [this](const google::protobuf::MessageLite& header, size_t size) -> char* {
        const auto op = static_cast<const v1::PushPullRequest&>(header).op();
        if (op != v1::OP_PUSH && op != v1::OP_PUSH_PULL) return nullptr;
        payload_.resize((size + sizeof(float) - 1) / sizeof(float));
        payload_taken_ = static_cast<int64_t>(size);
        return reinterpret_cast<char*>(payload_.data());
      },
      &payload_bytes, options_.request_limits.max_payload_bytes);
  request_.Clear();
  if (decoded.ok()) {
    Handle(req, payload_bytes);
    if (payload_.capacity() * sizeof(float) > kKeepPayloadBytes) std::vector<float>().swap(payload_);
    if (unpacked_.capacity() * sizeof(float) > kKeepPayloadBytes) std::vector<float>().swap(unpacked_);
    bool refused = false;
    {
      absl::MutexLock lock(&box_->mu);
      refused = !box_->refused.ok();
      if (refused) box_->reads_done = true;  // no read follows to say so
    }
    if (refused) {
      DropParkedPulls();
      MaybeFinish();
      return;
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
      SetStatus(absl::InvalidArgumentError(absl::StrCat("malformed request: ", decoded.message())), &resp);
      Send(box_, resp);
    }
  }
  ReadNext();
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
  const int64_t dropped = store_->DropPulls(owner_);
  if (dropped > 0) DTRAIN_LOG(INFO) << "PushPull stream gone: dropped its " << dropped << " parked pulls";
}

absl::Status PushPullReactor::CheckFinite(const v1::PushPullRequest& req, const float* grad, int64_t numel) const {
  if (options_.allow_non_finite || kv::AllFinite(grad, numel)) return absl::OkStatus();
  const int64_t at = kv::FirstNonFinite(grad, numel);
  const float bad = grad[at];
  return absl::InvalidArgumentError(absl::StrCat(
      "push of key ", req.key(), " at step ", req.step(), " by worker ", req.worker_rank(), ": gradient element ",
      at, " is ", std::isnan(bad) ? "NaN" : (bad > 0 ? "+Inf" : "-Inf"),
      "; refused so that it cannot poison the key for every worker (dtrain-server --allow-non-finite applies "
      "such pushes)"));
}

absl::Status PushPullReactor::Unpack(const v1::PushPullRequest& req, int64_t payload_bytes, int64_t* numel) {
  // The size comes from the key this server holds, never from the wire.
  absl::StatusOr<int64_t> n = store_->ElementCount(req.key());
  if (!n.ok()) return n.status();
  const kv::CompressionSpec spec{static_cast<kv::CompressionType>(req.compression()), req.gc_threshold()};
  if (codec_ == nullptr || codec_spec_.type != spec.type || codec_spec_.threshold != spec.threshold) {
    if (absl::Status s = kv::ValidateSpec(spec); !s.ok()) return s;  // request_checks let it through
    codec_ = kv::MakeCodec(spec);
    codec_spec_ = spec;
  }
  const int64_t got = std::max<int64_t>(payload_bytes, 0);
  const int64_t want = codec_->PackedBytes(*n);
  if (got != want) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeRequest(req), " at step ", req.step(), ": ",
                                                   kv::CompressionTypeName(spec.type), " data has ", got,
                                                   " bytes, expected ", want, " for the key's ", *n, " elements"));
  }
  unpacked_.resize(static_cast<size_t>(*n));
  *numel = *n;
  return codec_->Decode(reinterpret_cast<const char*>(payload_.data()), got, unpacked_.data(), *n);
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
  // A stream refused at its start (no token, another's) answers that before anything
  // else: its requests are not looked at.
  if (!options_.refused.ok() && !Admit(req, resp)) return;
  if (absl::Status s = ValidatePushPullRequest(req, payload_bytes, options_.request_limits); !s.ok()) {
    if (metrics != nullptr) metrics->RequestFailed();
    SetStatus(s, &resp);
    Send(box_, resp);
    return;
  }
  if (!Admit(req, resp)) return;
  int64_t min_version = req.min_version();
  if (req.op() != v1::OP_PULL) {
    if (metrics != nullptr) metrics->PushReceived(std::max<int64_t>(payload_bytes, 0));
    int64_t numel = std::max<int64_t>(payload_bytes, 0) / static_cast<int64_t>(sizeof(float));
    const float* grad = payload_.data();
    absl::Status s;
    if (payload_bytes > 0 && payload_taken_ != payload_bytes) {
      // Fields may come in any order; the data was skipped because `op` only said
      // "push" after it. Our encoder puts data last.
      s = absl::InvalidArgumentError(absl::StrCat(DescribeRequest(req),
                                                  ": op must come before data on the wire (put data last)"));
    }
    // Compressed: unpacked to floats, then checked and merged as any uncompressed push is.
    if (s.ok() && req.compression() != v1::COMPRESSION_NONE) {
      s = Unpack(req, payload_bytes, &numel);
      grad = unpacked_.data();
    }
    if (s.ok() && metrics != nullptr) metrics->PushUnpacked(numel * static_cast<int64_t>(sizeof(float)));
    if (s.ok()) s = CheckFinite(req, grad, numel);
    if (s.ok()) s = store_->Push(req.worker_rank(), req.step(), req.key(), grad, numel);
    if (!s.ok() || req.op() == v1::OP_PUSH) {
      if (!s.ok() && metrics != nullptr) metrics->RequestFailed();
      SetStatus(s, &resp);
      Send(box_, resp);
      return;
    }
    // The weights after this step's update (SSP: up to --staleness steps older; async
    // pulls answer at once anyway).
    min_version = store_->PullVersionAfterPush(req.step());
  }
  // The worker may ask for a shorter wait than ours, so that the server's answer,
  // which names the missing workers, beats the worker's own deadline.
  const absl::Duration wait =
      req.timeout_ms() > 0 ? absl::Milliseconds(req.timeout_ms()) : options_.sync_timeout;
  if (metrics != nullptr) metrics->PullRequested();
  // `metrics` outlives every stream and parked pull: the server is shut down before it.
  // A replica the worker takes no weights from (replication) answers the version only.
  const bool version_only = req.version_only();
  auto answer_pull = [box = box_, resp = std::move(resp), metrics, version_only,
                      catch_up = options_.catch_up,
                      key = req.key()](const absl::Status &s,
                                       const kv::PullAnswer &a) mutable {
    // Runs under the key's lock: copy the weights out and queue, nothing more.
    SetStatus(s, &resp);
    if (!s.ok()) {
      if (metrics != nullptr)
        metrics->RequestFailed();
      Send(box, resp);
      return;
    }
    const int64_t weight_bytes = a.numel * static_cast<int64_t>(sizeof(float));
    // Pull compression: the step's packed change where the worker asked
    // for it and the store has it (ShardStore::PullDelta), else the weights.
    const bool packed = !version_only && a.delta != nullptr;
    if (metrics != nullptr && !version_only) {
      metrics->PullAnswered(packed ? a.delta_bytes : weight_bytes,
                            weight_bytes);
    }
    resp.set_version(a.version);
    grpc::Slice weights;
    if (packed) {
      resp.set_compression(static_cast<v1::Compression>(a.delta_type));
      weights = grpc::Slice(a.delta, static_cast<size_t>(a.delta_bytes));
    } else if (!version_only) {
      weights = kv::CopyToSlice(a.data, a.numel);
    }
    auto answer = [box, version_only](const v1::PushPullResponse &r,
                                      grpc::Slice w) {
      if (version_only) {
        Send(box, r);
      } else {
        Send(box, r.key(),
             kv::EncodeWithPayload(
                 r, v1::PushPullResponse::kDataFieldNumber, std::move(w)));
      }
    };
    // Replication: a restarted chain member may have to get the key first
    // (replica_catch_up.h); the answer then says so.
    std::vector<JoinedServer> joined_now;
    if (catch_up != nullptr &&
        catch_up->Hold(
            key, a.version,
            [answer, resp, weights](const std::vector<JoinedServer> &joined) {
              v1::PushPullResponse r = resp;
              for (const JoinedServer &j : joined) {
                r.add_joined_servers(j.rank);
                r.add_joined_addresses(j.address);
              }
              answer(r, weights);
            },
            &joined_now)) {
      return;
    }
    for (const JoinedServer &j : joined_now) {
      resp.add_joined_servers(j.rank);
      resp.add_joined_addresses(j.address);
    }
    answer(resp, std::move(weights));
  };
  const absl::Time deadline = absl::Now() + wait;
  if (req.exact_version()) {
    store_->Pull(
        req.worker_rank(), req.key(), min_version, deadline,
        [answer_pull =
             std::move(answer_pull)](const absl::Status &s, int64_t version,
                                     const float *data, int64_t numel) mutable {
          answer_pull(s, kv::PullAnswer{version, data, numel});
        },
        owner_, kv::PullMode::kExact);
    return;
  }
  // A push-pull's worker holds the weights of the step it pushed (pull_delta
  // says so).
  store_->PullDelta(req.worker_rank(), req.key(), min_version,
                    req.pull_delta() ? req.step() : -1, deadline,
                    std::move(answer_pull), owner_);
}

bool PushPullReactor::Admit(const v1::PushPullRequest& req, v1::PushPullResponse& resp) {
  absl::Status s = options_.refused;
  if (s.ok() && options_.bound_worker) {
    s = NodeChecks::SameWorker(*options_.bound_worker, req.worker_rank(), req.incarnation());
    if (!s.ok()) DTRAIN_LOG(WARNING) << s.message();
  }
  if (s.ok()) s = store_->AdmitWorker(req.worker_rank(), req.job_id(), req.incarnation());
  if (s.ok()) return true;
  if (metrics_ != nullptr) metrics_->RequestFailed();
  if (s.code() == absl::StatusCode::kFailedPrecondition || s.code() == absl::StatusCode::kPermissionDenied ||
      s.code() == absl::StatusCode::kUnauthenticated) {
    // A fenced process or another job's: nothing it sends later can be accepted.
    DTRAIN_LOG(WARNING) << "PushPull stream refused: " << s.message();
    absl::MutexLock lock(&box_->mu);
    if (box_->refused.ok()) box_->refused = s;
  }
  SetStatus(s, &resp);
  Send(box_, resp);
  return false;
}

void PushPullReactor::Send(const std::shared_ptr<Outbox>& box, const v1::PushPullResponse& resp) {
  Send(box, resp.key(), kv::EncodeMessage(resp));
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
    reactor->writing_ = box->queue.Pop();
    box->queued_bytes -= static_cast<int64_t>(reactor->writing_.Length());
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
      writing_ = box_->queue.Pop();
      box_->queued_bytes -= static_cast<int64_t>(writing_.Length());
      box_->writing = next = true;
    }
    if (ok && box_->read_paused && !Full()) {
      box_->read_paused = false;
      resume_reading = true;
    }
  }
  if (!ok) DropParkedPulls();
  if (resume_reading) StartRead(&request_);
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
