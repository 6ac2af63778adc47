#include "services/worker/kv/local_aggregator.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/kv/vector_loop.h"

namespace dtrain::worker {
namespace {

ABSL_ATTRIBUTE_NOINLINE void AddInto(float* __restrict acc, const float* __restrict g, int64_t n) {
  kv::ForEachElement(n, [=](int64_t i) { acc[i] += g[i]; });
}

}  // namespace

absl::Status CheckReplicaBuffers(const std::vector<ReplicaBuffers>& params, int num_replicas) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (static_cast<int>(params[i].per_replica.size()) != num_replicas) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " has ", params[i].per_replica.size(),
                                                     " replica buffers, the aggregator has ", num_replicas,
                                                     " replicas"));
    }
    if (params[i].numel < 0) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " has ", params[i].numel, " elements"));
    }
  }
  return absl::OkStatus();
}

absl::Status CpuAggregator::Reduce(const std::vector<ReplicaBuffers>& params) {
  if (absl::Status s = CheckReplicaBuffers(params, num_replicas_); !s.ok()) return s;
  for (const ReplicaBuffers& p : params) {
    for (int r = 1; r < num_replicas_; ++r) AddInto(p.per_replica[0], p.per_replica[r], p.numel);
  }
  return absl::OkStatus();
}

absl::Status CpuAggregator::Broadcast(const std::vector<ReplicaBuffers>& params) {
  if (absl::Status s = CheckReplicaBuffers(params, num_replicas_); !s.ok()) return s;
  for (const ReplicaBuffers& p : params) {
    for (int r = 1; r < num_replicas_; ++r) {
      std::memcpy(p.per_replica[r], p.per_replica[0], sizeof(float) * p.numel);
    }
  }
  return absl::OkStatus();
}

}  // namespace dtrain::worker
