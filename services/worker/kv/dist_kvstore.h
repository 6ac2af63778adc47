// kvstore `dist_sync`, `dist_device_sync`, `dist_async`: gradients go to the parameter
// servers, which merge them and run the optimizer (MXNet's update_on_kvstore).
//
// Keys are the placement's slices (common/kv/placement.h); each PushPull sends every
// slice to its server on that server's stream, pipelined, then waits for all of them.
// Pulled weights land directly in the parameters' buffers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/kv/placement.h"
#include "services/worker/cluster.h"
#include "services/worker/kv/kvstore.h"
#include "services/worker/kv/ps_client.h"

namespace dtrain::worker {

struct DistOptions {
  KVStoreMode mode = KVStoreMode::kDistSync;  // one of the dist_* modes
  // How long connecting to a server may take.
  absl::Duration connect_timeout = absl::Seconds(120);
  // How long one PushPull (and the init barrier) may wait for the other workers.
  absl::Duration sync_timeout = absl::Seconds(120);
};

class DistKVStore : public KVStore {
 public:
  // Connects to every server of `cluster`, which must outlive the store (its rank,
  // barriers and job status are used on every step).
  static absl::StatusOr<std::unique_ptr<DistKVStore>> Connect(const DistOptions& options, Cluster& cluster);
  ~DistKVStore() override;

  KVStoreMode mode() const override { return options_.mode; }
  absl::Status Init(const std::vector<ParamRef>& params, const KVStoreInit& init) override;
  absl::Status PushPull(int64_t step, const std::vector<const float*>& grads) override;
  absl::StatusOr<checkpoint::OptimizerStates> SaveStates() override;
  KVStoreStats stats() const override;
  PushPullTiming last_timing() const override { return last_timing_; }
  int64_t resume_step() const override { return resume_step_; }

 private:
  DistKVStore(DistOptions options, Cluster& cluster);
  // Worker 0's part of Init: configures every server and gives each key its value.
  absl::Status ConfigureServers(const KVStoreInit& init);
  absl::Status WaitAllServers(absl::Time deadline);
  // Init of a process that replaced a dead worker (Cluster::rejoined()): the servers
  // are configured and training runs, so it asks them for the keys' versions, takes
  // the step to redo and pulls the weights that step starts from.
  absl::Status Rejoin();

  DistOptions options_;
  Cluster& cluster_;
  std::vector<std::unique_ptr<PsClient>> servers_;
  std::vector<ParamRef> params_;
  kv::Placement placement_;
  std::string optimizer_name_;
  PushPullTiming last_timing_;
  int64_t resume_step_ = -1;
};

}  // namespace dtrain::worker
