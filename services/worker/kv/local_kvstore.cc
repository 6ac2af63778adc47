#include "services/worker/kv/local_kvstore.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/kv/placement.h"
#include "common/status_macros.h"
#include "services/worker/kv/resume_states.h"

namespace dtrain::worker {

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
  // In process there is nothing to wait for: push is the update, pull the copy back.
  last_timing_ = {};
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    const uint64_t key = kv::MakeKey(static_cast<int>(i), 0);
    const absl::Time start = absl::Now();
    DTRAIN_RETURN_IF_ERROR(store_.Push(0, step, key, grads[i], p.numel));
    const absl::Time pushed = absl::Now();
    last_timing_.push += absl::ToDoubleSeconds(pushed - start);
    absl::Status pulled;
    // One worker: the update is applied by the Push above, so the pull answers at once.
    store_.Pull(0, key, step + 1, absl::InfiniteFuture(),
                [&](const absl::Status& s, int64_t, const float* data, int64_t n) {
                  pulled = s;
                  if (s.ok()) std::memcpy(p.weights, data, sizeof(float) * n);
                });
    last_timing_.pull += absl::ToDoubleSeconds(absl::Now() - pushed);
    DTRAIN_RETURN_IF_ERROR(pulled);
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
