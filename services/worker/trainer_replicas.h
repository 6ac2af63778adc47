// The model replicas a worker trains through when it has devices (--gpus, --cpu-replicas):
// one network of the master's architecture per device, made into DeviceReplicas.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/models/models.h"
#include "common/models/network_spec.h"
#include "services/worker/device_replicas.h"
#include "services/worker/gpu_devices.h"

namespace dtrain::worker {

// Null when `devices` is empty (the host model trains alone). Otherwise the replicas, given
// the master's parameters and buffers; the master's storage may move (pinned memory for
// GPUs, DeviceReplicas::Create), so call this before anything keeps pointers to it.
absl::StatusOr<std::unique_ptr<DeviceReplicas>> PlaceReplicas(const models::NetworkSpec& spec, int num_classes,
                                                              const std::vector<int64_t>& input_shape,
                                                              models::Network& master, WorkerDevices devices);

}  // namespace dtrain::worker
