// Server-side optimizers (MXNet's update_on_kvstore): the update rule applied to one
// key's merged gradient. Pure arithmetic on float spans, no gRPC, no LibTorch, so the
// same code runs in a parameter server and in the `local` kvstore.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain::kv {

struct OptimizerOptions {
  std::string name = "sgd";  // "sgd" or "adam"
  double learning_rate = 0.1;
  double momentum = 0.0;
  double weight_decay = 0.0;
  // MXNet's MultiFactorScheduler: lr = learning_rate * lr_factor^k where k is the
  // number of entries s of lr_steps with update_count >= s.
  double lr_factor = 1.0;
  std::vector<int64_t> lr_steps;  // ascending, in updates of a key
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double rescale_grad = 1.0;
  double clip_gradient = 0.0;  // <= 0: no clipping
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Floats of state per weight element: sgd 1 (0 when momentum == 0), adam 2.
  virtual int StateSlots() const = 0;

  // Applies one update. `update_count` is how many updates this key had before this
  // one (0 for the first); it drives the lr schedule and Adam's bias correction.
  // `state` holds StateSlots() * n floats laid out slot-major ([m..., v...]), zero at
  // the start of training.
  //
  // sgd:  g = clip(rescale*grad) + wd*w;  mom = momentum*mom - lr*g;  w += mom
  //       (momentum == 0: w -= lr*g)
  // adam: g = clip(rescale*grad) + wd*w;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
  //       t = update_count+1;  w -= lr*sqrt(1-b2^t)/(1-b1^t) * m/(sqrt(v)+eps)
  // lr is the schedule's (LearningRate) times `lr_scale` (> 0; an elastic job's factor,
  // kv::StepLr); a scale of exactly 1.0 is not multiplied in, so that the update is the
  // same float operations as without one.
  void Update(int64_t update_count, float* weight, const float* grad, float* state, int64_t n,
              double lr_scale = 1.0) const {
    Run(update_count, lr_scale, weight, weight, grad, state, n);
  }
  // As Update, but writes the updated weights to `out` (n floats that do not overlap
  // `weight`) and leaves `weight` as it was. Bit-identical to Update. The shard store
  // updates this way into a spare buffer and swaps, which keeps the previous version
  // (StoreConfig::keep_previous_version) without a copy: the same memory traffic as
  // updating in place.
  void UpdateInto(int64_t update_count, const float* weight, float* out, const float* grad, float* state, int64_t n,
                  double lr_scale = 1.0) const {
    Run(update_count, lr_scale, weight, out, grad, state, n);
  }

  double LearningRate(int64_t update_count) const;
  // LearningRate(update_count) * lr_scale, or exactly LearningRate's where lr_scale is 1.0.
  double ScaledLearningRate(int64_t update_count, double lr_scale) const;
  const OptimizerOptions& options() const { return options_; }

 protected:
  explicit Optimizer(OptimizerOptions options) : options_(std::move(options)) {}
  // One update, in place when `in` == `out` (else the two do not overlap).
  virtual void Run(int64_t update_count, double lr_scale, const float* in, float* out, const float* grad, float* state,
                   int64_t n) const = 0;
  OptimizerOptions options_;
};

// INVALID_ARGUMENT for an unknown name or out-of-range settings (lr <= 0, momentum
// outside [0,1), unsorted lr_steps...), naming the setting.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options);

}  // namespace dtrain::kv
