// Aggregation over one worker's own devices, before anything goes to a kvstore: the
// gradients of the worker's model replicas are summed into the first replica's
// buffers (Reduce), and after the kvstore has updated the first replica's weights,
// they are copied to the other replicas (Broadcast). MXNet's `device` and
// `dist_device_sync` modes are this plus a kvstore; so is c10d's split of a front end
// over per-device backends.
//
// Implementations: CpuAggregator (plain memory, below); NcclAggregator
// (nccl_aggregator.h: one communicator over the worker's GPUs, when built with CUDA);
// MakeLocalAggregator (local_aggregator_factory.h) picks one. Operations may run asynchronously; Wait
// returns once every operation issued so far has finished.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dtrain::worker {

// One parameter on every replica: per_replica[r] points at `numel` floats on replica r.
struct ReplicaBuffers {
  std::vector<float*> per_replica;
  int64_t numel = 0;
};

class LocalAggregator {
 public:
  virtual ~LocalAggregator() = default;

  virtual int num_replicas() const = 0;

  // Sums every replica's buffer into replica 0's, in replica order (so the result is
  // the same on every run). INVALID_ARGUMENT when a parameter does not have one buffer
  // per replica.
  virtual absl::Status Reduce(const std::vector<ReplicaBuffers>& params) = 0;
  // Copies replica 0's buffer to every other replica.
  virtual absl::Status Broadcast(const std::vector<ReplicaBuffers>& params) = 0;
  // Until the operations issued so far are done; DEADLINE_EXCEEDED naming what is not.
  virtual absl::Status Wait(absl::Time deadline) = 0;
};

// INVALID_ARGUMENT naming the first parameter without exactly `num_replicas` buffers, or
// with a negative element count: the check every implementation makes before it writes.
absl::Status CheckReplicaBuffers(const std::vector<ReplicaBuffers>& params, int num_replicas);

// Replicas in host memory. Synchronous: Wait has nothing to wait for.
class CpuAggregator final : public LocalAggregator {
 public:
  explicit CpuAggregator(int num_replicas) : num_replicas_(num_replicas) {}

  int num_replicas() const override { return num_replicas_; }
  absl::Status Reduce(const std::vector<ReplicaBuffers>& params) override;
  absl::Status Broadcast(const std::vector<ReplicaBuffers>& params) override;
  absl::Status Wait(absl::Time) override { return absl::OkStatus(); }

 private:
  int num_replicas_;
};

}  // namespace dtrain::worker
