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
#include "common/kv/ps_client.h"
#include "common/scheduler_client.h"
#include "services/worker/kvstore.h"

namespace dtrain::worker {

struct DistOptions {
  std::string type;  // dist_sync / dist_device_sync / dist_async
  std::string scheduler;
  int num_workers = 1;
  int num_servers = 1;
  int requested_rank = -1;
  std::string host = "127.0.0.1";
  absl::Duration register_timeout = absl::Seconds(120);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // How long one PushPull (and barriers) may wait for the other workers.
  absl::Duration sync_timeout = absl::Seconds(120);
};

class DistKVStore : public KVStore {
 public:
  // Registers with the scheduler (blocking until the cluster is complete or the
  // register timeout names who is missing) and connects to every server.
  static absl::StatusOr<std::unique_ptr<DistKVStore>> Connect(const DistOptions& options);
  ~DistKVStore() override;

  const std::string& type() const override { return options_.type; }
  int rank() const override { return rank_; }
  int num_workers() const override { return options_.num_workers; }
  absl::Status Init(const std::vector<ParamRef>& params, const KVStoreInit& init) override;
  absl::Status PushPull(int64_t step, const std::vector<const float*>& grads) override;
  absl::StatusOr<OptimizerStates> SaveStates() override;
  absl::Status Barrier(const std::string& name) override;
  void ReportProgress(int64_t step, double samples_per_sec) override;
  absl::Status Finish(bool failed, const std::string& reason) override;
  KVStoreStats stats() const override;
  PushPullTiming last_timing() const override { return last_timing_; }

 private:
  explicit DistKVStore(DistOptions options);
  absl::Status WaitAllServers(absl::Time deadline);

  DistOptions options_;
  int rank_ = -1;
  std::unique_ptr<SchedulerClient> scheduler_;
  std::vector<std::unique_ptr<kv::PsClient>> servers_;
  std::vector<ParamRef> params_;
  kv::Placement placement_;
  std::string optimizer_name_;
  struct Shutdown;
  std::shared_ptr<Shutdown> shutdown_;
  PushPullTiming last_timing_;
};

}  // namespace dtrain::worker
