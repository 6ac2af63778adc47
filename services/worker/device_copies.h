// How a DeviceReplicas step moves tensors between the host and the replicas' devices, and
// waits for the devices' kernels before the local aggregator (which runs on streams of its
// own, or on the host) reads their results.
//
// Two implementations, picked by MakeDeviceCopies:
// - synchronous copies (device_copies.cc): CPU "devices" (tests, and a worker's CPU
//   replicas), and GPUs in a build whose LibTorch has no CUDA headers to do better with;
// - stream-ordered copies (device_copies_cuda.cc, DTRAIN_TORCH_CUDA): pinned host memory,
//   non-blocking copies on a side stream per GPU ordered against LibTorch's stream by CUDA
//   events, and waits on events instead of whole-device synchronisations.
// LibTorch's own operations report failures by throwing c10::Error, as everywhere in the
// trainer; what this code calls itself answers a status.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/worker/flat_parameters.h"

namespace dtrain::worker {

class DeviceCopies {
 public:
  virtual ~DeviceCopies() = default;

  // Moves the master parameters' values, and zeroed gradients, into flat host tensors
  // (flat_parameters.h) the devices copy from and into at full speed (pinned for GPUs).
  // Their storage changes: call it before anything keeps pointers to them (KVStore::Init's
  // ParamRefs).
  virtual absl::StatusOr<FlatParameters> PrepareHost(const std::vector<torch::Tensor>& master_params) = 0;

  // Replica r's slice (x, y) of a host batch on its device. May return before the copy is
  // done: everything LibTorch queues afterwards for replica r's device sees the values.
  // Errors (INTERNAL) name the CUDA call, the replica and the runtime's words.
  virtual absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> ToReplica(int r, const torch::Tensor& x,
                                                                            const torch::Tensor& y) = 0;

  // After every replica's backward was queued: returns once their kernels are done, so the
  // aggregator may read their gradients.
  virtual absl::Status AwaitReplicas() = 0;

  // device[i] (replica 0's) into host[i], same shapes; returns once every value is on the host.
  virtual absl::Status ToHost(const std::vector<torch::Tensor>& device, const std::vector<torch::Tensor>& host) = 0;

  // host[i] into device[i] (replica 0's), same shapes; returns once done, so the
  // aggregator's broadcast may read them.
  virtual absl::Status FromHost(const std::vector<torch::Tensor>& host, const std::vector<torch::Tensor>& device) = 0;
};

// Stream-ordered copies when a device is a GPU and LibTorch has CUDA (DTRAIN_TORCH_CUDA);
// synchronous copies otherwise.
std::unique_ptr<DeviceCopies> MakeDeviceCopies(const std::vector<torch::Device>& devices);

#if DTRAIN_TORCH_CUDA
// device_copies_cuda.cc's: every device a CUDA device.
std::unique_ptr<DeviceCopies> MakeCudaDeviceCopies(const std::vector<torch::Device>& devices);
#endif

}  // namespace dtrain::worker
