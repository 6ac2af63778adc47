#include "services/worker/kv/server_channel.h"

#include "absl/strings/str_cat.h"

namespace dtrain::worker {

KeyRequest KeyRequest::Push(int64_t step, uint64_t key, const PushData& data) {
  KeyRequest r;
  r.op = Op::kPush;
  r.key = key;
  r.step_or_version = step;
  r.payload = data;
  return r;
}

KeyRequest KeyRequest::Push(int64_t step, uint64_t key, const float* grad, int64_t numel) {
  return Push(step, key, PushData::Floats(grad, numel));
}

KeyRequest KeyRequest::Pull(uint64_t key, int64_t min_version, float* out, int64_t numel, int64_t* version) {
  KeyRequest r;
  r.op = Op::kPull;
  r.key = key;
  r.step_or_version = min_version;
  r.target = Target::kWeights;
  r.out = out;
  r.numel = numel;
  r.version_out = version;
  return r;
}

KeyRequest KeyRequest::PullExact(uint64_t key, int64_t version, float* out, int64_t numel, int64_t* version_out) {
  KeyRequest r = Pull(key, version, out, numel, version_out);
  r.target = Target::kExact;
  return r;
}

KeyRequest KeyRequest::PullVersionOnly(uint64_t key, int64_t min_version, int64_t* version) {
  KeyRequest r = Pull(key, min_version, nullptr, 0, version);
  r.target = Target::kVersionOnly;
  return r;
}

KeyRequest KeyRequest::PushPull(int64_t step, uint64_t key, const PushData& data, float* out, bool pull_delta) {
  KeyRequest r = Push(step, key, data);
  r.op = Op::kPushPull;
  r.target = pull_delta ? Target::kDelta : Target::kWeights;
  r.out = out;
  r.numel = data.numel;
  return r;
}

KeyRequest KeyRequest::PushPull(int64_t step, uint64_t key, const float* grad, float* out, int64_t numel) {
  return PushPull(step, key, PushData::Floats(grad, numel), out);
}

KeyRequest KeyRequest::PushPullVersionOnly(int64_t step, uint64_t key, const PushData& data, int64_t* version) {
  KeyRequest r = Push(step, key, data);
  r.op = Op::kPushPull;
  r.target = Target::kVersionOnly;
  r.numel = data.numel;
  r.version_out = version;
  return r;
}

KeyRequest KeyRequest::PushPullVersionOnly(int64_t step, uint64_t key, const float* grad, int64_t numel,
                                           int64_t* version) {
  return PushPullVersionOnly(step, key, PushData::Floats(grad, numel), version);
}

const char* OpName(KeyRequest::Op op) {
  switch (op) {
    case KeyRequest::Op::kPush: return "push";
    case KeyRequest::Op::kPull: return "pull";
    case KeyRequest::Op::kPushPull: return "push-pull";
  }
  return "request";
}

namespace {

const char* TargetName(KeyRequest::Target target) {
  switch (target) {
    case KeyRequest::Target::kNone: return "no answer";
    case KeyRequest::Target::kWeights: return "weights";
    case KeyRequest::Target::kVersionOnly: return "a version only";
    case KeyRequest::Target::kExact: return "an exact version";
    case KeyRequest::Target::kDelta: return "a packed change";
  }
  return "an unknown answer";
}

}  // namespace

absl::Status ValidateKeyRequest(const KeyRequest& r) {
  using Target = KeyRequest::Target;
  bool fits = false;
  switch (r.op) {
    case KeyRequest::Op::kPush: fits = r.target == Target::kNone; break;
    case KeyRequest::Op::kPull:
      fits = r.target == Target::kWeights || r.target == Target::kVersionOnly || r.target == Target::kExact;
      break;
    case KeyRequest::Op::kPushPull:
      fits = r.target == Target::kWeights || r.target == Target::kVersionOnly || r.target == Target::kDelta;
      break;
  }
  const std::string what = absl::StrCat(OpName(r.op), " of key ", r.key);
  if (!fits) return absl::InvalidArgumentError(absl::StrCat(what, " cannot be answered with ", TargetName(r.target)));
  const bool writes = r.target == Target::kWeights || r.target == Target::kExact || r.target == Target::kDelta;
  if (writes && (r.out == nullptr || r.numel < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " asks for weights without a buffer for them"));
  }
  if (r.op == KeyRequest::Op::kPushPull && writes && r.numel != r.payload.numel) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " pushes ", r.payload.numel, " elements but has room for ", r.numel, " in its answer"));
  }
  return absl::OkStatus();
}

}  // namespace dtrain::worker
