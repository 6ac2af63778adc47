#include "services/worker/lazy_pulls.h"

#include "absl/time/clock.h"
#include "common/log.h"

namespace dtrain::worker {

LazyPulls::LazyPulls(models::Network& net, KVStore& kv) : net_(net), kv_(kv), active_(kv.PullsLazily()) {
  if (!active_) return;
  const std::vector<torch::Tensor> params = net_.parameters();
  for (size_t i = 0; i < params.size(); ++i) index_of_[params[i].unsafeGetTensorImpl()] = i;
  net_.SetParamGate([this](const torch::nn::Module& m) { Gate(m); });
}

LazyPulls::~LazyPulls() {
  if (!active_) return;
  // Whatever stopped the epoch, no answer may land in the weights after this.
  Finish().IgnoreError();
  net_.SetParamGate(nullptr);
}

absl::Status LazyPulls::Start(int64_t step, const std::vector<torch::Tensor>& params,
                              const std::vector<const float*>& grads) {
  if (!active_) return kv_.PushPull(step, grads);
  held_.clear();
  for (const torch::Tensor& p : params) held_.push_back(p.grad());
  absl::Status st = kv_.StartPushPull(step, grads);
  if (!st.ok()) {
    held_.clear();
    return st;
  }
  pending_ = true;
  if (!logged_) {
    logged_ = true;
    DTRAIN_LOG(INFO) << "overlap: each step's weights arrive during the next forward, which waits for each layer "
                        "as it reaches it (from step "
                     << step << ")";
  }
  return absl::OkStatus();
}

absl::Status LazyPulls::Finish() {
  if (!pending_) return absl::OkStatus();
  pending_ = false;
  const absl::Time start = absl::Now();
  absl::Status st = kv_.FinishPushPull();
  gate_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
  held_.clear();
  return st;
}

double LazyPulls::TakeGateSeconds() {
  const double s = gate_seconds_;
  gate_seconds_ = 0;
  return s;
}

const std::vector<size_t>& LazyPulls::ParamsOf(const torch::nn::Module& module) {
  auto it = params_of_.find(&module);
  if (it != params_of_.end()) return it->second;
  std::vector<size_t>& indices = params_of_[&module];
  for (const torch::Tensor& p : module.parameters()) {
    auto found = index_of_.find(p.unsafeGetTensorImpl());
    if (found != index_of_.end()) indices.push_back(found->second);
  }
  return indices;
}

void LazyPulls::Gate(const torch::nn::Module& module) {
  if (!pending_) return;
  const absl::Time start = absl::Now();
  // An error is kept by the kvstore and returned by Finish after this forward; the
  // forward goes on over weights nobody writes any more (its result is dropped).
  for (size_t i : ParamsOf(module)) {
    if (!kv_.AwaitParam(i).ok()) break;
  }
  gate_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace dtrain::worker
