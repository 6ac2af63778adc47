#include "common/kv/store_setup.h"

#include <utility>

#include "common/kv/rank_set_merge_rule.h"

namespace dtrain::kv {

absl::StatusOr<std::unique_ptr<StoreSetup>> MakeStoreSetup(const StoreConfig& config, StoreObserver* observer,
                                                           SnapshotHook snapshots, const StepRanks* step_ranks) {
  if (step_ranks != nullptr && config.mode != MergeMode::kSync) {
    return absl::InvalidArgumentError("a store whose workers change (elastic) merges in sync mode only");
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> opt = CreateOptimizer(config.optimizer);
  if (!opt.ok()) return opt.status();
  auto setup = std::make_unique<StoreSetup>();
  setup->config = config;
  setup->optimizer = *std::move(opt);
  setup->pull_codec = MakeCodec({config.pull_compression, 1.0f});
  setup->optimizer_slots = setup->optimizer->StateSlots();
  setup->state_slots = setup->optimizer_slots + (setup->pull_codec != nullptr ? 1 : 0);
  setup->rule = step_ranks != nullptr ? std::make_unique<RankSetMergeRule>(step_ranks) : CreateMergeRule(config);
  setup->step_ranks = step_ranks;
  setup->observer = observer;
  setup->heard = std::make_unique<HeardFrom>(config.num_workers);
  setup->fence = std::make_unique<WorkerFence>(config.num_workers);
  setup->keep_previous = config.mode == MergeMode::kSync && config.keep_previous_version;
  if (config.mode == MergeMode::kSync) setup->snapshots = std::move(snapshots);
  return setup;
}

}  // namespace dtrain::kv
