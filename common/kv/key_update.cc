#include "common/kv/key_update.h"

#include "common/kv/rank_mean.h"
#include "common/kv/vector_ops.h"

namespace dtrain::kv {
namespace {

// Pull compression: the optimizer's new weights go to a spare buffer, and the weights
// move by exactly what their packed change unpacks to.
void UpdatePacked(const StoreSetup& s, KeyEntry& k, const float* grad, double lr_scale)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) {
  const int64_t n = k.numel;
  float* next = k.previous.kept() ? k.previous.spare() : k.packed.Spare(n);
  const float* current = k.values.data();
  s.optimizer->UpdateInto(k.version, current, next, grad, k.state.data(), n, lr_scale);
  float* residual = k.state.data() + s.optimizer_slots * n;
  k.packed.Pack(*s.pull_codec, current, next, residual, n, k.version + 1);
  if (k.previous.kept()) {
    k.previous.Advance(&k.values, k.version);
  } else {
    k.packed.TakeSpare(&k.values);
  }
}

}  // namespace

const float* MeanGradient(const StoreSetup& s, KeyEntry& k, int last_rank, const float* last_grad) {
  auto grad_of = [&](int w)
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(k.mu) { return w == last_rank ? last_grad : k.pending[w].data(); };
  if (s.step_ranks != nullptr) return MeanOverRanks(s.step_ranks->RanksAt(k.version), k.numel, grad_of, &k.merged);
  const int num_workers = s.config.num_workers;
  if (num_workers == 1) return grad_of(0);
  k.merged.assign(grad_of(0), grad_of(0) + k.numel);
  float* acc = k.merged.data();
  for (int w = 1; w < num_workers; ++w) AddInto(acc, grad_of(w), k.numel);
  DivideBy(acc, k.numel, static_cast<float>(num_workers));
  return acc;
}

void UpdateKey(const StoreSetup& s, KeyEntry& k, const float* grad) {
  // The step this update merges is the key's version (sync; elastic jobs are).
  const double lr_scale =
      s.step_lr != nullptr ? s.step_lr->LrFactorAt(k.version, s.config.epoch_lr, s.config.optimizer.lr_factor) : 1.0;
  if (s.pull_codec != nullptr) {
    UpdatePacked(s, k, grad, lr_scale);
  } else if (k.previous.kept()) {
    // Into the spare buffer, then swap: the old weights become the previous version
    // (what this step was computed from, for a worker that must redo it) with no
    // copy and no allocation, and the same memory traffic as an update in place.
    s.optimizer->UpdateInto(k.version, k.values.data(), k.previous.spare(), grad, k.state.data(), k.numel, lr_scale);
    k.previous.Advance(&k.values, k.version);
  } else {
    s.optimizer->Update(k.version, k.values.data(), grad, k.state.data(), k.numel, lr_scale);
  }
  ++k.version;
}

}  // namespace dtrain::kv
