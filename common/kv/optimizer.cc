#include "common/kv/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "common/kv/vector_loop.h"

namespace dtrain::kv {
namespace {

// clip(rescale * grad) + wd * w for one element. Kept branch-free (the clip bound is
// +inf when off) so the loops below vectorise.
inline float EffectiveGrad(float grad, float weight, float rescale, float clip, float wd) {
  const float g = std::min(std::max(rescale * grad, -clip), clip);
  return g + wd * weight;
}

struct GradTerms {
  float rescale;
  float clip;
  float wd;
};

GradTerms TermsOf(const OptimizerOptions& o) {
  return {static_cast<float>(o.rescale_grad), o.clip_gradient > 0 ? static_cast<float>(o.clip_gradient) : HUGE_VALF,
          static_cast<float>(o.weight_decay)};
}

// The kernels: one loop each, never inlined. GCC 12 at -O2 vectorised neither loop
// when two ForEachElement loops shared a function (checked with -fopt-info-vec).
ABSL_ATTRIBUTE_NOINLINE void SgdKernel(float* __restrict weight, const float* __restrict grad, int64_t n, float lr,
                                       GradTerms t) {
  ForEachElement(n, [=](int64_t i) { weight[i] -= lr * EffectiveGrad(grad[i], weight[i], t.rescale, t.clip, t.wd); });
}

ABSL_ATTRIBUTE_NOINLINE void SgdMomentumKernel(float* __restrict weight, const float* __restrict grad,
                                               float* __restrict mom, int64_t n, float lr, float momentum,
                                               GradTerms t) {
  ForEachElement(n, [=](int64_t i) {
    const float g = EffectiveGrad(grad[i], weight[i], t.rescale, t.clip, t.wd);
    mom[i] = momentum * mom[i] - lr * g;
    weight[i] += mom[i];
  });
}

// The same three, reading the weights from `in` and writing them to `out` (no
// overlap): each expression as above, so the bits are the same.
ABSL_ATTRIBUTE_NOINLINE void SgdKernelInto(const float* __restrict in, float* __restrict out,
                                           const float* __restrict grad, int64_t n, float lr, GradTerms t) {
  ForEachElement(n, [=](int64_t i) { out[i] = in[i] - lr * EffectiveGrad(grad[i], in[i], t.rescale, t.clip, t.wd); });
}

ABSL_ATTRIBUTE_NOINLINE void SgdMomentumKernelInto(const float* __restrict in, float* __restrict out,
                                                   const float* __restrict grad, float* __restrict mom, int64_t n,
                                                   float lr, float momentum, GradTerms t) {
  ForEachElement(n, [=](int64_t i) {
    const float g = EffectiveGrad(grad[i], in[i], t.rescale, t.clip, t.wd);
    mom[i] = momentum * mom[i] - lr * g;
    out[i] = in[i] + mom[i];
  });
}

ABSL_ATTRIBUTE_NOINLINE void AdamKernelInto(const float* __restrict in, float* __restrict out,
                                            const float* __restrict grad, float* __restrict m, float* __restrict v,
                                            int64_t n, float lr_t, float b1, float one_minus_b1, float b2,
                                            float one_minus_b2, float eps, GradTerms t) {
  ForEachElement(n, [=](int64_t i) {
    const float g = EffectiveGrad(grad[i], in[i], t.rescale, t.clip, t.wd);
    m[i] = b1 * m[i] + one_minus_b1 * g;
    v[i] = b2 * v[i] + one_minus_b2 * g * g;
    out[i] = in[i] - lr_t * m[i] / (std::sqrt(v[i]) + eps);
  });
}

// Vectorises only with -fno-math-errno (else sqrt keeps an errno branch).
ABSL_ATTRIBUTE_NOINLINE void AdamKernel(float* __restrict weight, const float* __restrict grad, float* __restrict m,
                                        float* __restrict v, int64_t n, float lr_t, float b1, float one_minus_b1,
                                        float b2, float one_minus_b2, float eps, GradTerms t) {
  ForEachElement(n, [=](int64_t i) {
    const float g = EffectiveGrad(grad[i], weight[i], t.rescale, t.clip, t.wd);
    m[i] = b1 * m[i] + one_minus_b1 * g;
    v[i] = b2 * v[i] + one_minus_b2 * g * g;
    weight[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  });
}

class Sgd final : public Optimizer {
 public:
  explicit Sgd(OptimizerOptions options) : Optimizer(std::move(options)) {}

  int StateSlots() const override { return options_.momentum == 0.0 ? 0 : 1; }

 private:
  void Run(int64_t update_count, double lr_scale, const float* in, float* out, const float* grad, float* state,
           int64_t n) const override {
    const float lr = static_cast<float>(ScaledLearningRate(update_count, lr_scale));
    const float momentum = static_cast<float>(options_.momentum);
    if (options_.momentum == 0.0) {
      if (in == out) {
        SgdKernel(out, grad, n, lr, TermsOf(options_));
      } else {
        SgdKernelInto(in, out, grad, n, lr, TermsOf(options_));
      }
    } else if (in == out) {
      SgdMomentumKernel(out, grad, state, n, lr, momentum, TermsOf(options_));
    } else {
      SgdMomentumKernelInto(in, out, grad, state, n, lr, momentum, TermsOf(options_));
    }
  }
};

class Adam final : public Optimizer {
 public:
  explicit Adam(OptimizerOptions options) : Optimizer(std::move(options)) {}

  int StateSlots() const override { return 2; }

 private:
  void Run(int64_t update_count, double lr_scale, const float* in, float* out, const float* grad, float* state,
           int64_t n) const override {
    // Bias correction folded into the step size, as MXNet does; in double because
    // 1 - beta^t loses most of its digits in float for small t.
    const double t = static_cast<double>(update_count + 1);
    const double correction = std::sqrt(1.0 - std::pow(options_.beta2, t)) / (1.0 - std::pow(options_.beta1, t));
    const float lr_t = static_cast<float>(ScaledLearningRate(update_count, lr_scale) * correction);
    // 1 - beta from the doubles: in float, 1 - 0.999f is off by 1e-5 relative.
    const float b1 = static_cast<float>(options_.beta1);
    const float one_minus_b1 = static_cast<float>(1.0 - options_.beta1);
    const float b2 = static_cast<float>(options_.beta2);
    const float one_minus_b2 = static_cast<float>(1.0 - options_.beta2);
    const float eps = static_cast<float>(options_.epsilon);
    if (in == out) {
      AdamKernel(out, grad, state, state + n, n, lr_t, b1, one_minus_b1, b2, one_minus_b2, eps, TermsOf(options_));
    } else {
      AdamKernelInto(in, out, grad, state, state + n, n, lr_t, b1, one_minus_b1, b2, one_minus_b2, eps,
                     TermsOf(options_));
    }
  }
};

absl::Status Invalid(const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("optimizer: ", what)); }

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
      return Invalid(
          absl::StrCat("lr_steps must be strictly ascending, got ", o.lr_steps[i - 1], " then ", o.lr_steps[i]));
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

double Optimizer::ScaledLearningRate(int64_t update_count, double lr_scale) const {
  const double lr = LearningRate(update_count);
  return lr_scale == 1.0 ? lr : lr * lr_scale;
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerOptions& options) {
  if (absl::Status s = Validate(options); !s.ok()) return s;
  if (options.name == "adam") return std::unique_ptr<Optimizer>(new Adam(options));
  return std::unique_ptr<Optimizer>(new Sgd(options));
}

}  // namespace dtrain::kv
