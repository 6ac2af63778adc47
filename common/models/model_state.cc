#include "common/models/model_state.h"

#include <algorithm>

namespace dtrain::models {
namespace {

std::vector<torch::nn::BatchNorm2dImpl*> BatchNorms(Network& net) {
  std::vector<torch::nn::BatchNorm2dImpl*> out;
  for (const std::shared_ptr<torch::nn::Module>& m : net.modules(/*include_self=*/false)) {
    if (auto* bn = m->as<torch::nn::BatchNorm2dImpl>()) out.push_back(bn);
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> CheckpointTensors(Network& net) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : net.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : net.named_buffers()) {
    if (b.value().scalar_type() == torch::kFloat32) out.emplace_back(b.key(), b.value());
  }
  return out;
}

bool HasBatchNorm(Network& net) { return !BatchNorms(net).empty(); }

void RecalibrateBatchNorm(Network& net, const torch::Tensor& images, int64_t batch_size) {
  std::vector<torch::nn::BatchNorm2dImpl*> bns = BatchNorms(net);
  if (bns.empty() || images.size(0) == 0) return;
  std::vector<c10::optional<double>> momenta;
  for (auto* bn : bns) {
    momenta.push_back(bn->options.momentum());
    // No momentum: LibTorch then averages the batches seen since the reset, each with
    // weight 1/num_batches_tracked.
    bn->options.momentum(c10::nullopt);
    bn->reset_running_stats();
  }
  const bool was_training = net.is_training();
  net.train();
  {
    torch::NoGradGuard no_grad;
    const int64_t n = images.size(0);
    const int64_t batch = std::max<int64_t>(1, std::min(batch_size, n));
    for (int64_t first = 0; first + batch <= n; first += batch) net.forward(images.narrow(0, first, batch));
  }
  net.train(was_training);
  for (size_t i = 0; i < bns.size(); ++i) bns[i]->options.momentum(momenta[i]);
}

}  // namespace dtrain::models
