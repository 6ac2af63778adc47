#include "services/worker/trainer_replicas.h"

#include <utility>

#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::worker {

absl::StatusOr<std::unique_ptr<DeviceReplicas>> PlaceReplicas(const models::NetworkSpec& spec, int num_classes,
                                                              const std::vector<int64_t>& input_shape,
                                                              models::Network& master, WorkerDevices devices) {
  if (devices.devices.empty()) return std::unique_ptr<DeviceReplicas>();
  std::vector<std::shared_ptr<models::Network>> nets;
  for (size_t r = 0; r < devices.devices.size(); ++r) {
    DTRAIN_ASSIGN_OR_RETURN(std::shared_ptr<models::Network> net,
                            models::CreateNetwork(spec, num_classes, input_shape));
    nets.push_back(std::move(net));
  }
  DTRAIN_LOG(INFO) << "training " << nets.size() << " model replica" << (nets.size() == 1 ? "" : "s") << " on "
                   << devices.description << ", each on its slice of the batch; the host model's gradients "
                   << "are pushed and the pulled weights loaded into every replica";
  return DeviceReplicas::Create(master, std::move(nets), std::move(devices.devices), std::move(devices.aggregator));
}

}  // namespace dtrain::worker
