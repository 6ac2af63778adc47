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

#include "absl/container/flat_hash_map.h"
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
  absl::StatusOr<int64_t> Rollback() override;

 private:
  DistKVStore(DistOptions options, Cluster& cluster);
  // Worker 0's part of Init: configures every server and gives each key its value.
  absl::Status ConfigureServers(const KVStoreInit& init);
  absl::Status WaitAllServers(absl::Time deadline);
  // Init of a process that replaced a dead worker (Cluster::rejoined()): the servers
  // are configured and training runs, so it asks them for the keys' versions, takes
  // the step to redo and pulls the weights that step starts from.
  absl::Status Rejoin(const KVStoreInit& init);
  using Versions = absl::flat_hash_map<uint64_t, kv::KeyVersion>;
  // Every server's keys, their versions and this rank's last accepted push step.
  absl::StatusOr<Versions> FetchVersions();
  // "" when every key of the placement is held; else how many are not, naming one.
  std::string MissingKeys(const Versions& versions) const;
  // Waits for slice i's answer to the PushPull of `step`, checking the job every
  // second and, past the sync timeout, waiting on while a dead worker may rejoin
  // (time spent so added to *rejoin_wait).
  absl::Status AwaitSlice(size_t i, int64_t step, absl::Duration* rejoin_wait);
  // Issue 11: a server's stream broke (the server died) or its parked pull was failed
  // by a rollback: waits (up to the sync timeout, checking the job every second) for
  // the scheduler's rollback order and returns RollbackStatus; the job's end or the
  // timeout return `error`.
  absl::Status AwaitRollback(const absl::Status& error);
  // Opens new streams to every server of `servers` (rank order).
  absl::Status Reconnect(const std::vector<ServerEndpoint>& servers);

  DistOptions options_;
  Cluster& cluster_;
  std::vector<std::unique_ptr<PsClient>> servers_;
  std::vector<ParamRef> params_;
  kv::Placement placement_;
  std::string optimizer_name_;
  PushPullTiming last_timing_;
  int64_t resume_step_ = -1;
  std::vector<PsClient::Ticket> tickets_;  // this step's, one per slice
  // A rejoined process until its first step is done (it heartbeats "resuming").
  bool resuming_ = false;
  absl::Time joined_;
};

}  // namespace dtrain::worker
