#include "common/kv/store_config.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain::kv {

const char* ModeName(MergeMode m) {
  switch (m) {
    case MergeMode::kSync: return "sync";
    case MergeMode::kAsync: return "async";
    case MergeMode::kSsp: return "ssp";
  }
  return "?";
}

std::string DescribeConfigDiff(const StoreConfig& a, const StoreConfig& b) {
  std::vector<std::string> d;
  auto cmp = [&d](const char* name, const auto& x, const auto& y) {
    if (x != y) d.push_back(absl::StrCat(name, " ", x, " vs ", y));
  };
  if (a.mode != b.mode) d.push_back(absl::StrCat("mode ", ModeName(a.mode), " vs ", ModeName(b.mode)));
  cmp("num_workers", a.num_workers, b.num_workers);
  cmp("staleness", a.staleness, b.staleness);
  if (a.keep_previous_version != b.keep_previous_version) {
    d.push_back(absl::StrCat("keep_previous_version ", a.keep_previous_version ? "true" : "false", " vs ",
                             b.keep_previous_version ? "true" : "false"));
  }
  if (a.pull_compression != b.pull_compression) {
    d.push_back(absl::StrCat("pull_compression ", CompressionTypeName(a.pull_compression), " vs ",
                             CompressionTypeName(b.pull_compression)));
  }
  if (!(a.epoch_lr == b.epoch_lr)) {
    d.push_back(absl::StrCat("epoch_lr [", absl::StrJoin(a.epoch_lr.epochs, ","), "] of ", a.epoch_lr.num_examples,
                             " examples in batches of ", a.epoch_lr.batch_size, " vs [",
                             absl::StrJoin(b.epoch_lr.epochs, ","), "] of ", b.epoch_lr.num_examples, " in ",
                             b.epoch_lr.batch_size));
  }
  const OptimizerOptions& x = a.optimizer;
  const OptimizerOptions& y = b.optimizer;
  cmp("optimizer.name", x.name, y.name);
  cmp("optimizer.learning_rate", x.learning_rate, y.learning_rate);
  cmp("optimizer.momentum", x.momentum, y.momentum);
  cmp("optimizer.weight_decay", x.weight_decay, y.weight_decay);
  cmp("optimizer.lr_factor", x.lr_factor, y.lr_factor);
  if (x.lr_steps != y.lr_steps) {
    d.push_back(absl::StrCat("optimizer.lr_steps [", absl::StrJoin(x.lr_steps, ","), "] vs [",
                             absl::StrJoin(y.lr_steps, ","), "]"));
  }
  cmp("optimizer.beta1", x.beta1, y.beta1);
  cmp("optimizer.beta2", x.beta2, y.beta2);
  cmp("optimizer.epsilon", x.epsilon, y.epsilon);
  cmp("optimizer.rescale_grad", x.rescale_grad, y.rescale_grad);
  cmp("optimizer.clip_gradient", x.clip_gradient, y.clip_gradient);
  return absl::StrJoin(d, "; ");
}

absl::Status ValidateStoreConfig(const StoreConfig& config, const StoreLimits& limits) {
  if (config.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers must be >= 1, got ", config.num_workers));
  }
  if (config.staleness < 0 || config.staleness > kMaxStaleness ||
      (config.staleness != 0 && config.mode != MergeMode::kSsp)) {
    return absl::InvalidArgumentError(
        absl::StrCat("staleness ", config.staleness, " (want 0..", kMaxStaleness, ", and only with dist_ssp)"));
  }
  if (config.num_workers > limits.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat("num_workers ", config.num_workers, " is over this server's cap of ",
                                                   limits.max_workers, " workers (--max-workers)"));
  }
  if (config.pull_compression != CompressionType::kNone) {
    if (absl::Status s = ValidateSpec({config.pull_compression, 1.0f}); !s.ok()) return s;
    if (config.mode != MergeMode::kSync || config.pull_compression == CompressionType::kTwoBit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pull compression ", CompressionTypeName(config.pull_compression), " with mode ", ModeName(config.mode),
          ": pulls are compressed in dist_sync only (a packed change is from the step a worker pushed), and "
          "with fp16, int8 or 1bit (2bit's fixed quantum does not fit weight changes)"));
    }
  }
  if (config.epoch_lr.enabled()) {
    if (absl::Status s = CheckEpochLrSteps(config.epoch_lr); !s.ok()) return s;
    if (config.mode != MergeMode::kSync || !config.optimizer.lr_steps.empty()) {
      return absl::InvalidArgumentError(
          "epoch_lr is for an elastic job's sync store, with no optimizer.lr_steps: give the schedule one way");
    }
  }
  return absl::OkStatus();
}

}  // namespace dtrain::kv
