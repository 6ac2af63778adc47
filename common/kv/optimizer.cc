#include "common/kv/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dtrain::kv {
namespace {

// clip(rescale * grad) + wd * w for one element. Inlined into the loops below; kept
// branch-free (clip bound = +inf when off) so GCC vectorises the loops.
inline float EffectiveGrad(float grad, float weight, float rescale, float clip, float wd) {
  const float g = std::min(std::max(rescale * grad, -clip), clip);
  return g + wd * weight;
}

float ClipBound(const OptimizerOptions& o) {
  return o.clip_gradient > 0 ? static_cast<float>(o.clip_gradient) : HUGE_VALF;
}

class Sgd final : public Optimizer {
 public:
  explicit Sgd(OptimizerOptions options) : Optimizer(std::move(options)) {}

  int StateSlots() const override { return options_.momentum == 0.0 ? 0 : 1; }

  void Update(int64_t update_count, float* __restrict weight, const float* __restrict grad,
              float* __restrict state, int64_t n) const override {
    const float lr = static_cast<float>(LearningRate(update_count));
    const float rescale = static_cast<float>(options_.rescale_grad);
    const float clip = ClipBound(options_);
    const float wd = static_cast<float>(options_.weight_decay);
    if (options_.momentum == 0.0) {
      for (int64_t i = 0; i < n; ++i) {
        weight[i] -= lr * EffectiveGrad(grad[i], weight[i], rescale, clip, wd);
      }
      return;
    }
    const float momentum = static_cast<float>(options_.momentum);
    float* __restrict mom = state;
    for (int64_t i = 0; i < n; ++i) {
      const float g = EffectiveGrad(grad[i], weight[i], rescale, clip, wd);
      mom[i] = momentum * mom[i] - lr * g;
      weight[i] += mom[i];
    }
  }
};

class Adam final : public Optimizer {
 public:
  explicit Adam(OptimizerOptions options) : Optimizer(std::move(options)) {}

  int StateSlots() const override { return 2; }

  void Update(int64_t update_count, float* __restrict weight, const float* __restrict grad,
              float* __restrict state, int64_t n) const override {
    // Bias correction folded into the step size, as MXNet does; computed in double
    // because 1 - beta^t loses most of its digits in float for small t.
    const double t = static_cast<double>(update_count + 1);
    const double correction =
        std::sqrt(1.0 - std::pow(options_.beta2, t)) / (1.0 - std::pow(options_.beta1, t));
    const float lr_t = static_cast<float>(LearningRate(update_count) * correction);
    const float b1 = static_cast<float>(options_.beta1);
    const float b2 = static_cast<float>(options_.beta2);
    const float eps = static_cast<float>(options_.epsilon);
    const float rescale = static_cast<float>(options_.rescale_grad);
    const float clip = ClipBound(options_);
    const float wd = static_cast<float>(options_.weight_decay);
    float* __restrict m = state;
    float* __restrict v = state + n;
    for (int64_t i = 0; i < n; ++i) {
      const float g = EffectiveGrad(grad[i], weight[i], rescale, clip, wd);
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      weight[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
    }
  }
};

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer: ", what));
}

absl::Status Validate(const OptimizerOptions& o) {
  if (o.name != "sgd" && o.name != "adam") {
    return Invalid(absl::StrCat("unknown name \"", o.name, "\" (want \"sgd\" or \"adam\")"));
  }
  if (!std::isfinite(o.learning_rate) || o.learning_rate <= 0) {
    return Invalid(absl::StrCat("learning_rate must be > 0, got ", o.learning_rate));
  }
  if (!(o.momentum >= 0 && o.momentum < 1)) {
    return Invalid(absl::StrCat("momentum must be in [0, 1), got ", o.momentum));
  }
  if (!std::isfinite(o.weight_decay) || o.weight_decay < 0) {
    return Invalid(absl::StrCat("weight_decay must be >= 0, got ", o.weight_decay));
  }
  // MultiFactorScheduler only ever lowers the rate.
  if (!(o.lr_factor > 0 && o.lr_factor <= 1)) {
    return Invalid(absl::StrCat("lr_factor must be in (0, 1], got ", o.lr_factor));
  }
  for (size_t i = 0; i < o.lr_steps.size(); ++i) {
    if (o.lr_steps[i] < 1) {
      return Invalid(absl::StrCat("lr_steps[", i, "] must be >= 1, got ", o.lr_steps[i]));
    }
    if (i > 0 && o.lr_steps[i] <= o.lr_steps[i - 1]) {
      return Invalid(absl::StrCat("lr_steps must be strictly ascending, got ", o.lr_steps[i - 1],
                                  " then ", o.lr_steps[i]));
    }
  }
  if (!std::isfinite(o.rescale_grad) || o.rescale_grad <= 0) {
    return Invalid(absl::StrCat("rescale_grad must be > 0, got ", o.rescale_grad));
  }
  if (std::isnan(o.clip_gradient)) return Invalid("clip_gradient is NaN");
  if (o.name == "adam") {
    if (!(o.beta1 >= 0 && o.beta1 < 1)) {
      return Invalid(absl::StrCat("beta1 must be in [0, 1), got ", o.beta1));
    }
    if (!(o.beta2 >= 0 && o.beta2 < 1)) {
      return Invalid(absl::StrCat("beta2 must be in [0, 1), got ", o.beta2));
    }
    // epsilon keeps m / (sqrt(v) + eps) finite where v is still zero.
    if (!std::isfinite(o.epsilon) || o.epsilon <= 0) {
      return Invalid(absl::StrCat("epsilon must be > 0, got ", o.epsilon));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double Optimizer::LearningRate(int64_t update_count) const {
  double lr = options_.learning_rate;
  for (int64_t step : options_.lr_steps) {
    if (update_count < step) break;
    lr *= options_.lr_factor;
  }
  return lr;
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  if (options.name == "adam") return std::unique_ptr<Optimizer>(new Adam(options));
  return std::unique_ptr<Optimizer>(new Sgd(options));
}

}  // namespace dtrain::kv
