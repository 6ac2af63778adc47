#include "services/worker/kv/key_request_proto.h"

#include "absl/strings/str_cat.h"

namespace dtrain::worker {
namespace {

v1::Op WireOp(KeyRequest::Op op) {
  switch (op) {
    case KeyRequest::Op::kPush: return v1::OP_PUSH;
    case KeyRequest::Op::kPull: return v1::OP_PULL;
    case KeyRequest::Op::kPushPull: return v1::OP_PUSH_PULL;
  }
  return v1::OP_PULL;
}

}  // namespace

v1::PushPullRequest KeyRequestProto(const KeyRequest& r, const RequestSender& sender) {
  using Target = KeyRequest::Target;
  v1::PushPullRequest req;
  req.set_op(WireOp(r.op));
  req.set_worker_rank(sender.worker_rank);
  req.set_key(r.key);
  req.set_dtype(v1::DTYPE_FLOAT32);
  if (r.op == KeyRequest::Op::kPull) {
    req.set_min_version(r.step_or_version);
    req.set_timeout_ms(sender.pull_timeout_ms);
    if (r.target == Target::kExact) req.set_exact_version(true);
    if (r.target == Target::kVersionOnly) req.set_version_only(true);
  } else {
    req.set_step(r.step_or_version);
    if (r.op == KeyRequest::Op::kPushPull) {
      req.set_timeout_ms(sender.pull_timeout_ms);
      if (r.target == Target::kVersionOnly) req.set_version_only(true);
      // `out` holds the weights of the step pushed: the answer may be the change.
      if (r.target == Target::kDelta && sender.pull_delta) req.set_pull_delta(true);
    }
    if (r.membership_generation != 0) req.set_membership_generation(r.membership_generation);
    if (r.lag != 0) req.set_lag(r.lag);
    const kv::CompressionType packed = r.payload.compression.type;
    if (packed != kv::CompressionType::kNone) {
      req.set_compression(static_cast<v1::Compression>(packed));
      if (packed == kv::CompressionType::kTwoBit) req.set_gc_threshold(r.payload.compression.threshold);
    }
  }
  if (!sender.job_id.empty()) req.set_job_id(sender.job_id);
  if (sender.incarnation != 0) req.set_incarnation(sender.incarnation);
  return req;
}

std::string PackedAnswerProblem(const v1::PushPullResponse& answer, bool delta_asked, int64_t step,
                                const kv::GradientCodec* pull_codec) {
  if (!delta_asked || pull_codec == nullptr) return "a packed answer that was not asked for";
  if (answer.compression() != static_cast<v1::Compression>(pull_codec->type())) {
    return absl::StrCat("an answer packed as ", answer.compression(), ", not ",
                        kv::CompressionTypeName(pull_codec->type()));
  }
  if (answer.version() != step + 1) {
    return absl::StrCat("a packed change to version ", answer.version(), " after pushing step ", step);
  }
  return "";
}

}  // namespace dtrain::worker
