// NcclAggregator: the LocalAggregator over one process's GPUs (MXNet's `device` and
// `dist_device_sync`), one NCCL communicator made by ncclCommInitAll with one rank per
// replica, replica r on gpus[r]. Built only with CUDA and NCCL (DTRAIN_WITH_NCCL); it uses
// the CUDA runtime and NCCL's C API, not LibTorch, so it compiles wherever the toolkit is,
// GPU or not. The buffers it is given are device memory: replica r's on gpus[r].
//
// Reduce is ncclReduce(sum) to rank 0, Broadcast ncclBroadcast from rank 0, each enqueued
// on one stream per GPU; Wait polls the streams and the communicators' asynchronous errors
// until they are done or the deadline passes.
//
// Determinism. NCCL sums along the ring its topology search chose (rank 0's partial sum is
// added last), not in rank order, so the interface's "in replica order" holds exactly:
// - with 1 or 2 replicas, bit for bit (one float addition is commutative);
// - with 3 or more, not in general: the sum is the same from run to run on the same
//   machine, GPUs, NCCL version, NCCL_ALGO/NCCL_PROTO and channel count (NCCL picks them
//   from the topology; pin NCCL_ALGO=Ring NCCL_PROTO=Simple to keep them fixed when the
//   hardware or NCCL changes), but may differ from CpuAggregator's rank-order sum in the
//   last bits. Workers still end every dist_device_sync step with identical weights: the
//   servers merge the workers' pushes in rank order and every worker pulls the result.
//
// Errors: every failed CUDA or NCCL call becomes a status naming the call, the GPU and
// NCCL's or CUDA's own words. A collective that failed or missed Wait's deadline cannot be
// taken back: the communicators are aborted (c10d's watchdog does the same) and every later
// call answers FAILED_PRECONDITION saying why.
//
// Not thread-safe: one thread (the trainer's) calls it. It leaves the caller's current
// CUDA device as it found it.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/worker/kv/local_aggregator.h"

// NCCL's and CUDA's handle types, declared as their headers declare them, so that this
// header does not pull in nccl.h and cuda_runtime_api.h.
struct ncclComm;
struct CUstream_st;

namespace dtrain::worker {

class NcclAggregator final : public LocalAggregator {
 public:
  // `gpus` are CUDA device ordinals as this process sees them (after CUDA_VISIBLE_DEVICES).
  // INVALID_ARGUMENT: no GPU, a negative or repeated one. FAILED_PRECONDITION: no usable
  // CUDA device (naming what cudaGetDeviceCount answered), or a GPU beyond the count.
  // INTERNAL: ncclCommInitAll or a stream could not be made (naming the call).
  static absl::StatusOr<std::unique_ptr<NcclAggregator>> Create(const std::vector<int>& gpus);
  ~NcclAggregator() override;
  NcclAggregator(const NcclAggregator&) = delete;
  NcclAggregator& operator=(const NcclAggregator&) = delete;

  int num_replicas() const override { return static_cast<int>(gpus_.size()); }
  const std::vector<int>& gpus() const { return gpus_; }

  // Both also refuse (INVALID_ARGUMENT, nothing enqueued) a buffer that is not device
  // memory of its replica's GPU.
  absl::Status Reduce(const std::vector<ReplicaBuffers>& params) override;
  absl::Status Broadcast(const std::vector<ReplicaBuffers>& params) override;
  // DEADLINE_EXCEEDED naming each replica (and its GPU) whose stream is still busy.
  absl::Status Wait(absl::Time deadline) override;

 private:
  explicit NcclAggregator(std::vector<int> gpus) : gpus_(std::move(gpus)) {}

  // Checks the buffers, then enqueues `op(r, buffers of one parameter)` for every replica
  // of every parameter, one NCCL group per parameter (ncclCommInitAll's ranks live in one
  // thread, so each collective must be issued for all of them inside a group).
  enum class Op { kReduce, kBroadcast };
  absl::Status Enqueue(Op op, const std::vector<ReplicaBuffers>& params);
  absl::Status CheckDevicePointers(const std::vector<ReplicaBuffers>& params) const;
  // Aborts every communicator, remembers `why` for later calls, returns it.
  absl::Status Abort(absl::Status why);

  std::vector<int> gpus_;
  std::vector<ncclComm*> comms_;       // comms_[r]: rank r, on gpus_[r]
  std::vector<CUstream_st*> streams_;  // streams_[r]: on gpus_[r]
  absl::Status broken_;                // not OK once aborted
};

}  // namespace dtrain::worker
