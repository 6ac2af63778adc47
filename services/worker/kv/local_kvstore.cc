#include "services/worker/kv/local_kvstore.h"

#include <cstring>
#include <limits>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/kv/placement.h"
#include "common/status_macros.h"
#include "services/worker/kv/resume_states.h"

namespace dtrain::worker {

// With one worker a push-pull's step merges at its own push, so the handler answers
// within Handle, on the caller's thread. The lock keeps AnswerSink's any-thread
// contract all the same.
class LocalKVStore::Answers final : public kv::AnswerSink {
 public:
  // The next answer is about a parameter of `numel` floats, written to `weights`.
  void Expect(float* weights, int64_t numel) {
    absl::MutexLock lock(&mu_);
    weights_ = weights;
    numel_ = numel;
    data_bytes_ = -1;
    copied_at_ = absl::InfinitePast();
    answered_ = false;
    status_ = absl::OkStatus();
  }

  void Send(const v1::PushPullResponse& resp) override {
    absl::MutexLock lock(&mu_);
    Answer(resp);
  }

  // The store calls this with the key's lock held: one copy, straight into the
  // parameter, as the server's sink copies into the answer it will write.
  DataAnswer Prepare(const char* data, size_t bytes) override {
    absl::MutexLock lock(&mu_);
    copied_at_ = absl::Now();
    data_bytes_ = static_cast<int64_t>(bytes);
    if (bytes == static_cast<size_t>(numel_) * sizeof(float) && bytes > 0) std::memcpy(weights_, data, bytes);
    return [this](const v1::PushPullResponse& resp) {
      absl::MutexLock lock(&mu_);
      Answer(resp);
    };
  }

  // The status of the answer since Expect (INTERNAL when none came, or one without
  // the parameter's weights), and when its weights were copied (InfinitePast: never).
  absl::Status Take(uint64_t key, absl::Time* copied_at) {
    absl::MutexLock lock(&mu_);
    *copied_at = copied_at_;
    if (!answered_) {
      return absl::InternalError(absl::StrCat("key ", key, ": the in-process store did not answer the push-pull"));
    }
    return status_;
  }

 private:
  void Answer(const v1::PushPullResponse& resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    answered_ = true;
    status_ = absl::Status(static_cast<absl::StatusCode>(resp.code()), resp.message());
    const int64_t want = numel_ * static_cast<int64_t>(sizeof(float));
    if (status_.ok() && data_bytes_ != want) {
      status_ = absl::InternalError(absl::StrCat("key ", resp.key(), ": the in-process store answered ",
                                                 data_bytes_ < 0 ? int64_t{0} : data_bytes_, " bytes of weights for ",
                                                 numel_, " floats"));
    }
  }

  absl::Mutex mu_;
  float* weights_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t numel_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t data_bytes_ ABSL_GUARDED_BY(mu_) = -1;  // what Prepare was given; -1: no data
  absl::Time copied_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

namespace {

// In process there is no wire: a parameter is one key of any size, and nothing to
// wait for (the one worker's push completes its step).
kv::StreamOptions InProcess() {
  kv::StreamOptions options;
  options.sync_timeout = absl::InfiniteDuration();
  options.request_limits.max_payload_bytes = std::numeric_limits<int64_t>::max();
  return options;
}

}  // namespace

LocalKVStore::LocalKVStore(KVStoreMode mode)
    : mode_(mode), answers_(std::make_shared<Answers>()), handler_(&store_, InProcess(), answers_) {
  request_.set_op(v1::OP_PUSH_PULL);
  request_.set_worker_rank(0);
  request_.set_dtype(v1::DTYPE_FLOAT32);
}

LocalKVStore::~LocalKVStore() = default;

absl::Status LocalKVStore::Init(const std::vector<ParamRef>& params, const KVStoreInit& init) {
  params_ = params;
  optimizer_name_ = init.optimizer.name;
  kv::StoreConfig config;
  config.mode = kv::MergeMode::kSync;
  config.num_workers = 1;
  config.optimizer = init.optimizer;
  DTRAIN_RETURN_IF_ERROR(store_.Configure(config));
  DTRAIN_ASSIGN_OR_RETURN(ResumeIndex resume, IndexResumeStates(init.resume, optimizer_name_));
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    const uint64_t key = kv::MakeKey(static_cast<int>(i), 0);
    int64_t version = init.start_version;
    std::vector<float> state;
    DTRAIN_RETURN_IF_ERROR(resume.Take(key, &version, &state));
    DTRAIN_RETURN_IF_ERROR(store_.InitKey(key, {p.numel}, p.weights, p.numel, version, state));
  }
  return resume.CheckAllUsed();
}

absl::Status LocalKVStore::PushPull(int64_t step, const std::vector<const float*>& grads) {
  if (grads.size() != params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushPull got ", grads.size(), " gradients for ", params_.size(), " parameters"));
  }
  last_timing_ = {};
  request_.set_step(step);
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    const uint64_t key = kv::MakeKey(static_cast<int>(i), 0);
    request_.set_request_id(i + 1);
    request_.set_key(key);
    answers_->Expect(p.weights, p.numel);
    // The gradient is the request's payload where it lies: read in place.
    const absl::Time start = absl::Now();
    const absl::Status refusal =
        handler_.Handle(request_, grads[i], p.numel * static_cast<int64_t>(sizeof(float)), /*payload_taken=*/true);
    const absl::Time end = absl::Now();
    absl::Time copied_at;
    const absl::Status answered = answers_->Take(key, &copied_at);
    if (copied_at == absl::InfinitePast()) copied_at = end;
    // Push: the checks and the update; pull: the copy of the new weights.
    last_timing_.push += absl::ToDoubleSeconds(copied_at - start);
    last_timing_.pull += absl::ToDoubleSeconds(end - copied_at);
    DTRAIN_RETURN_IF_ERROR(refusal);
    if (!answered.ok()) {
      // Nothing may answer into the parameter after this returns.
      store_.DropPulls(handler_.owner());
      return answered;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<checkpoint::OptimizerStates> LocalKVStore::SaveStates() {
  std::vector<kv::KeyState> snaps;
  DTRAIN_RETURN_IF_ERROR(store_.Snapshot({}, &snaps));
  checkpoint::OptimizerStates out;
  out.optimizer = optimizer_name_;
  for (auto& s : snaps) out.keys.push_back(StateOnly(std::move(s)));
  return out;
}

}  // namespace dtrain::worker
