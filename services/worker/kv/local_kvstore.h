// kvstore `local` / `device`: one worker process, no servers. The same ShardStore a
// parameter server runs is used in-process, so the update rule is identical.
//
// On a machine with one CPU and no GPUs, `device` has a single device to aggregate
// over and behaves as `local`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/kv/shard_store.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {

class LocalKVStore : public KVStore {
 public:
  // `mode`: local or device.
  explicit LocalKVStore(KVStoreMode mode = KVStoreMode::kLocal) : mode_(mode) {}

  KVStoreMode mode() const override { return mode_; }
  absl::Status Init(const std::vector<ParamRef>& params, const KVStoreInit& init) override;
  absl::Status PushPull(int64_t step, const std::vector<const float*>& grads) override;
  absl::StatusOr<checkpoint::OptimizerStates> SaveStates() override;
  PushPullTiming last_timing() const override { return last_timing_; }

 private:
  KVStoreMode mode_;
  std::string optimizer_name_;
  std::vector<ParamRef> params_;
  kv::ShardStore store_;
  PushPullTiming last_timing_;
};

}  // namespace dtrain::worker
