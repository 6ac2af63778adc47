#include "services/worker/lazy_pulls.h"

#include "absl/time/clock.h"
#include "common/log.h"

namespace dtrain::worker {

// The store bounds each answer itself (--sync-timeout, extended while a dead worker may
// still be replaced) and names what it waited for; a deadline of ours would cut a
// rejoin short.
constexpr absl::Time kStoreDeadlines = absl::InfiniteFuture();

LazyPulls::LazyPulls(models::Network& net) : net_(net) {}

LazyPulls::~LazyPulls() {
  // Whatever stopped the epoch, no answer may land in the weights after this.
  Finish().IgnoreError();
  if (gated_) net_.SetParamGate(nullptr);
}

void LazyPulls::SetGate() {
  gated_ = true;
  const std::vector<torch::Tensor> params = net_.parameters();
  for (size_t i = 0; i < params.size(); ++i) index_of_[params[i].unsafeGetTensorImpl()] = i;
  net_.SetParamGate([this](const torch::nn::Module& m) { Gate(m); });
}

absl::Status LazyPulls::Hold(int64_t step, std::unique_ptr<PendingStep> pending,
                             const std::vector<torch::Tensor>& params) {
  if (pending->done()) return pending->Wait(kStoreDeadlines);
  held_.clear();
  for (const torch::Tensor& p : params) held_.push_back(p.grad());
  pending_ = std::move(pending);
  if (!gated_) {
    SetGate();
    DTRAIN_LOG(INFO) << "overlap: each step's weights arrive during the next forward, which waits for each layer "
                        "as it reaches it (from step "
                     << step << ")";
  }
  return absl::OkStatus();
}

absl::Status LazyPulls::Finish() {
  if (pending_ == nullptr) return absl::OkStatus();
  const absl::Time start = absl::Now();
  absl::Status st = pending_->Wait(kStoreDeadlines);
  gate_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
  pending_.reset();
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
  if (pending_ == nullptr) return;
  const absl::Time start = absl::Now();
  // An error is kept by the handle and returned by Finish after this forward; the
  // forward goes on over weights nobody writes any more (its result is dropped).
  for (size_t i : ParamsOf(module)) {
    if (!pending_->WaitParam(i, kStoreDeadlines).ok()) break;
  }
  gate_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace dtrain::worker
