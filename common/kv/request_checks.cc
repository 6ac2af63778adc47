#include "common/kv/request_checks.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace dtrain::kv {
namespace {

bool IsPush(v1::Op op) { return op == v1::OP_PUSH || op == v1::OP_PUSH_PULL; }

const char* OpText(v1::Op op) {
  switch (op) {
    case v1::OP_PUSH: return "push";
    case v1::OP_PULL: return "pull";
    case v1::OP_PUSH_PULL: return "push-pull";
    default: return "request";
  }
}

}  // namespace

std::string DescribeRequest(const v1::PushPullRequest& req) {
  return absl::StrCat(OpText(req.op()), " of key ", req.key(), " by worker ", req.worker_rank());
}

absl::Status ValidatePushPullRequest(const v1::PushPullRequest& req, int64_t payload_bytes,
                                     const RequestLimits& limits) {
  if (req.op() != v1::OP_PUSH && req.op() != v1::OP_PULL && req.op() != v1::OP_PUSH_PULL) {
    return absl::InvalidArgumentError(absl::StrCat("request ", req.request_id(), ": unknown op ", req.op(),
                                                   " (want OP_PUSH, OP_PULL or OP_PUSH_PULL)"));
  }
  const std::string what = DescribeRequest(req);
  const bool push = IsPush(req.op());
  if (push ? req.dtype() != v1::DTYPE_FLOAT32
           : req.dtype() != v1::DTYPE_FLOAT32 && req.dtype() != v1::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key ", req.key(), ": dtype must be DTYPE_FLOAT32, got ",
        v1::DType_IsValid(req.dtype()) ? v1::DType_Name(req.dtype()) : std::string("unknown"), " (", req.dtype(), ")"));
  }
  if (req.worker_rank() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": worker_rank ", req.worker_rank(), " is negative"));
  }
  if (push && req.step() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": step ", req.step(), " is negative (steps count from 0)"));
  }
  if (push && req.exact_version()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": exact_version is for pulls (a push-pull waits for the version after its step)"));
  }
  if (req.min_version() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": min_version ", req.min_version(), " is negative"));
  }
  if (req.timeout_ms() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": timeout_ms ", req.timeout_ms(), " is negative (0: the server's --sync-timeout)"));
  }
  if (req.timeout_ms() > limits.max_timeout_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": timeout_ms ", req.timeout_ms(), " is over the cap of ", limits.max_timeout_ms));
  }
  const int64_t data_size = payload_bytes < 0 ? 0 : payload_bytes;
  if (data_size > limits.max_payload_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": data has ", data_size, " bytes, over the cap of ", limits.max_payload_bytes));
  }
  if (!v1::Compression_IsValid(req.compression())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown compression ", req.compression(),
                                                   " (want COMPRESSION_NONE, _2BIT, _1BIT, _FP16 or _INT8)"));
  }
  if (req.pull_delta() && req.op() != v1::OP_PUSH_PULL) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": pull_delta is for push-pulls (the change is from the step pushed)"));
  }
  if (!push && (req.compression() != v1::COMPRESSION_NONE || req.gc_threshold() != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": compression and gc_threshold are for pushes (pulls are not compressed)"));
  }
  if (req.compression() == v1::COMPRESSION_2BIT) {
    if (!std::isfinite(req.gc_threshold()) || req.gc_threshold() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": 2bit gc_threshold ", req.gc_threshold(), " must be finite and > 0"));
    }
  } else if (req.gc_threshold() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": gc_threshold ", req.gc_threshold(), " without 2bit compression"));
  }
  // Packed data's exact size depends on the key's element count, which only the store
  // knows: the handler checks it when it unpacks (push_pull_handler.cc).
  if (push && req.compression() == v1::COMPRESSION_NONE && data_size % static_cast<int64_t>(sizeof(float)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("push of key ", req.key(), ": data has ", data_size, " bytes, not a whole number of float32s"));
  }
  if (!push && data_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull of key ", req.key(), " carries ", data_size, " bytes of data; only pushes do"));
  }
  return absl::OkStatus();
}

}  // namespace dtrain::kv
