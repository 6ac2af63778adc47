// kvstore `local` / `device`: one worker process, no servers. Each step's gradients go
// through the PushPullHandler a parameter server runs (common/kv/push_pull_handler.h)
// over the same ShardStore, in-process and without copies: the request's checks, the
// NaN check, the store's push and pull are the server's own, so the update rule is too.
//
// On a machine with one CPU and no GPUs, `device` has a single device to aggregate
// over and behaves as `local`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/kv/push_pull_handler.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/parameter_server.pb.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {

class LocalKVStore : public KVStore {
 public:
  // `mode`: local or device.
  explicit LocalKVStore(KVStoreMode mode = KVStoreMode::kLocal);
  ~LocalKVStore() override;

  KVStoreMode mode() const override { return mode_; }
  absl::Status Init(const std::vector<ParamRef>& params, const KVStoreInit& init) override;
  absl::Status PushPull(int64_t step, const std::vector<const float*>& grads) override;
  absl::StatusOr<checkpoint::OptimizerStates> SaveStates() override;
  PushPullTiming last_timing() const override { return last_timing_; }

 private:
  class Answers;  // where the handler's answers go: a pull's weights straight into its parameter

  KVStoreMode mode_;
  std::string optimizer_name_;
  std::vector<ParamRef> params_;
  kv::ShardStore store_;
  std::shared_ptr<Answers> answers_;
  kv::PushPullHandler handler_;  // after store_ and answers_, which it uses
  v1::PushPullRequest request_;  // one push-pull at a time; reused
  PushPullTiming last_timing_;
};

}  // namespace dtrain::worker
