#include "common/kv/push_pull_handler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/kv/finite_check.h"
#include "common/log.h"

namespace dtrain::kv {

void SetStatus(const absl::Status& s, v1::PushPullResponse* resp) {
  resp->set_code(static_cast<int32_t>(s.code()));
  resp->set_message(std::string(s.message()));
}

namespace {

uint64_t NextOwner() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// A request on a stream opened with `bound`'s token must speak for that worker
// (services/server/node_checks.h).
absl::Status SameWorker(const auth::TokenClaims& bound, int worker_rank, uint64_t incarnation) {
  if (worker_rank == bound.rank && incarnation == bound.incarnation) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("PushPull refused: a stream opened with the token of ",
                                                  auth::Describe(bound), " may not speak for worker ", worker_rank,
                                                  " incarnation ", incarnation));
}

}  // namespace

PushPullHandler::PushPullHandler(ShardStore* store, const StreamOptions& options, std::shared_ptr<AnswerSink> sink,
                                 Clock clock)
    : store_(store),
      options_(options),
      metrics_(options.metrics),
      sink_(std::move(sink)),
      clock_(std::move(clock)),
      owner_(NextOwner()) {}

absl::Status PushPullHandler::Handle(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes,
                                     bool payload_taken) {
  absl::Status refusal = HandleRequest(req, payload, payload_bytes, payload_taken);
  if (unpacked_.capacity() * sizeof(float) > kKeepPayloadBytes) std::vector<float>().swap(unpacked_);
  return refusal;
}

absl::Status PushPullHandler::HandleRequest(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes,
                                            bool payload_taken) {
  v1::PushPullResponse resp;
  resp.set_request_id(req.request_id());
  resp.set_key(req.key());
  absl::Status refusal;
  // A stream refused at its start (no token, another's) answers that before anything
  // else: its requests are not looked at.
  if (!options_.refused.ok() && !Admit(req, resp, &refusal)) return refusal;
  if (absl::Status s = ValidatePushPullRequest(req, payload_bytes, options_.request_limits); !s.ok()) {
    if (metrics_ != nullptr) metrics_->RequestFailed();
    SetStatus(s, &resp);
    sink_->Send(resp);
    return absl::OkStatus();
  }
  if (!Admit(req, resp, &refusal)) return refusal;
  int64_t min_version = req.min_version();
  if (req.op() != v1::OP_PULL) {
    if (!Push(req, payload, payload_bytes, payload_taken, resp)) return absl::OkStatus();
    // The weights after this step's update (SSP: up to --staleness steps older; async
    // pulls answer at once anyway).
    min_version = store_->PullVersionAfterPush(req.step());
  }
  Pull(req, min_version, std::move(resp));
  return absl::OkStatus();
}

bool PushPullHandler::Push(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes,
                           bool payload_taken, v1::PushPullResponse& resp) {
  if (metrics_ != nullptr) metrics_->PushReceived(std::max<int64_t>(payload_bytes, 0));
  int64_t numel = std::max<int64_t>(payload_bytes, 0) / static_cast<int64_t>(sizeof(float));
  const float* grad = payload;
  absl::Status s;
  if (payload_bytes > 0 && !payload_taken) {
    // Fields may come in any order; the data was skipped because `op` only said
    // "push" after it. Our encoder puts data last.
    s = absl::InvalidArgumentError(
        absl::StrCat(DescribeRequest(req), ": op must come before data on the wire (put data last)"));
  }
  // Compressed: unpacked to floats, then checked and merged as any uncompressed push is.
  if (s.ok() && req.compression() != v1::COMPRESSION_NONE) {
    s = Unpack(req, payload, payload_bytes, &numel);
    grad = unpacked_.data();
  }
  if (s.ok() && metrics_ != nullptr) metrics_->PushUnpacked(numel * static_cast<int64_t>(sizeof(float)));
  if (s.ok()) s = CheckFinite(req, grad, numel);
  if (s.ok()) {
    auto store_push = [&] { return store_->Push(req.worker_rank(), req.step(), req.key(), grad, numel, req.lag()); };
    s = options_.push_gate == nullptr
            ? store_push()
            : options_.push_gate->PushIfAdmitted(req.step(), req.membership_generation(), store_push);
  }
  if (s.ok() && req.op() != v1::OP_PUSH) return true;
  if (!s.ok() && metrics_ != nullptr) metrics_->RequestFailed();
  SetStatus(s, &resp);
  sink_->Send(resp);
  return false;
}

void PushPullHandler::Pull(const v1::PushPullRequest& req, int64_t min_version, v1::PushPullResponse resp) {
  // The worker may ask for a shorter wait than ours, so that the server's answer,
  // which names the missing workers, beats the worker's own deadline.
  const absl::Duration wait = req.timeout_ms() > 0 ? absl::Milliseconds(req.timeout_ms()) : options_.sync_timeout;
  if (metrics_ != nullptr) metrics_->PullRequested();
  // `metrics` outlives every stream and parked pull: the server is shut down before it.
  // A replica the worker takes no weights from (replication) answers the version only.
  auto answer_pull = [sink = sink_, resp = std::move(resp), metrics = metrics_, version_only = req.version_only(),
                      catch_up = options_.catch_up,
                      key = req.key()](const absl::Status& s, const PullAnswer& a) mutable {
    // Runs under the key's lock: copy the weights out and queue, nothing more.
    SetStatus(s, &resp);
    if (!s.ok()) {
      if (metrics != nullptr) metrics->RequestFailed();
      sink->Send(resp);
      return;
    }
    const int64_t weight_bytes = a.numel * static_cast<int64_t>(sizeof(float));
    // Pull compression: the step's packed change where the worker asked for it and the
    // store has it (ShardStore::PullDelta), else the weights.
    const bool packed = !version_only && a.delta != nullptr;
    if (metrics != nullptr && !version_only) metrics->PullAnswered(packed ? a.delta_bytes : weight_bytes, weight_bytes);
    resp.set_version(a.version);
    AnswerSink::DataAnswer answer = [sink](const v1::PushPullResponse& r) { sink->Send(r); };
    if (packed) {
      resp.set_compression(static_cast<v1::Compression>(a.delta_type));
      answer = sink->Prepare(a.delta, static_cast<size_t>(a.delta_bytes));
    } else if (!version_only) {
      answer = sink->Prepare(reinterpret_cast<const char*>(a.data), static_cast<size_t>(weight_bytes));
    }
    // Replication: a restarted chain member may have to get the key first
    // (replica_catch_up.h); the answer then says so.
    std::vector<JoinedServer> joined_now;
    if (catch_up != nullptr && catch_up->Hold(
                                   key, a.version,
                                   [answer, resp](const std::vector<JoinedServer>& joined) {
                                     v1::PushPullResponse r = resp;
                                     for (const JoinedServer& j : joined) {
                                       r.add_joined_servers(j.rank);
                                       r.add_joined_addresses(j.address);
                                     }
                                     answer(r);
                                   },
                                   &joined_now)) {
      return;
    }
    for (const JoinedServer& j : joined_now) {
      resp.add_joined_servers(j.rank);
      resp.add_joined_addresses(j.address);
    }
    answer(resp);
  };
  const absl::Time deadline = clock_() + wait;
  if (req.exact_version()) {
    store_->Pull(
        req.worker_rank(), req.key(), min_version, deadline,
        [answer_pull = std::move(answer_pull)](const absl::Status& s, int64_t version, const float* data,
                                               int64_t numel) mutable {
          answer_pull(s, PullAnswer{version, data, numel});
        },
        owner_, PullMode::kExact);
    return;
  }
  // A push-pull's worker holds the weights of the step it pushed (pull_delta says so).
  store_->PullDelta(req.worker_rank(), req.key(), min_version, req.pull_delta() ? req.step() : -1, deadline,
                    std::move(answer_pull), owner_);
}

bool PushPullHandler::Admit(const v1::PushPullRequest& req, v1::PushPullResponse& resp, absl::Status* refusal) {
  absl::Status s = options_.refused;
  if (s.ok() && options_.bound_worker) {
    s = SameWorker(*options_.bound_worker, req.worker_rank(), req.incarnation());
    if (!s.ok()) DTRAIN_LOG(WARNING) << s.message();
  }
  if (s.ok()) s = store_->AdmitWorker(req.worker_rank(), req.job_id(), req.incarnation());
  if (s.ok()) return true;
  if (metrics_ != nullptr) metrics_->RequestFailed();
  if (s.code() == absl::StatusCode::kFailedPrecondition || s.code() == absl::StatusCode::kPermissionDenied ||
      s.code() == absl::StatusCode::kUnauthenticated) {
    // A fenced process or another job's: nothing it sends later can be accepted.
    DTRAIN_LOG(WARNING) << "PushPull stream refused: " << s.message();
    *refusal = s;
  }
  SetStatus(s, &resp);
  sink_->Send(resp);
  return false;
}

absl::Status PushPullHandler::CheckFinite(const v1::PushPullRequest& req, const float* grad, int64_t numel) const {
  if (options_.allow_non_finite || AllFinite(grad, numel)) return absl::OkStatus();
  const int64_t at = FirstNonFinite(grad, numel);
  const float bad = grad[at];
  return absl::InvalidArgumentError(absl::StrCat(
      "push of key ", req.key(), " at step ", req.step(), " by worker ", req.worker_rank(), ": gradient element ", at,
      " is ", std::isnan(bad) ? "NaN" : (bad > 0 ? "+Inf" : "-Inf"),
      "; refused so that it cannot poison the key for every worker (dtrain-server --allow-non-finite applies "
      "such pushes)"));
}

absl::Status PushPullHandler::Unpack(const v1::PushPullRequest& req, const float* payload, int64_t payload_bytes,
                                     int64_t* numel) {
  // The size comes from the key this server holds, never from the wire.
  absl::StatusOr<int64_t> n = store_->ElementCount(req.key());
  if (!n.ok()) return n.status();
  const CompressionSpec spec{static_cast<CompressionType>(req.compression()), req.gc_threshold()};
  if (codec_ == nullptr || codec_spec_.type != spec.type || codec_spec_.threshold != spec.threshold) {
    if (absl::Status s = ValidateSpec(spec); !s.ok()) return s;  // request_checks let it through
    codec_ = MakeCodec(spec);
    codec_spec_ = spec;
  }
  const int64_t got = std::max<int64_t>(payload_bytes, 0);
  const int64_t want = codec_->PackedBytes(*n);
  if (got != want) {
    return absl::InvalidArgumentError(absl::StrCat(DescribeRequest(req), " at step ", req.step(), ": ",
                                                   CompressionTypeName(spec.type), " data has ", got,
                                                   " bytes, expected ", want, " for the key's ", *n, " elements"));
  }
  unpacked_.resize(static_cast<size_t>(*n));
  *numel = *n;
  return codec_->Decode(reinterpret_cast<const char*>(payload), got, unpacked_.data(), *n);
}

}  // namespace dtrain::kv
