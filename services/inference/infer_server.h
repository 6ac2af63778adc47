// The gRPC server of dtrain-infer: both inference protocols on one port, with the
// standard health service, server reflection v1alpha (Debian's grpc++ library) and v1
// (reflection_v1.h), dtrain's message limits and the process's credentials.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

namespace dtrain::inference {

// Serves `services` on `listen` (host:port; port 0: any free one) and sets *bound_port.
// Null when it cannot listen, logged with the reason (common/listen_failure.h).
std::unique_ptr<grpc::Server> StartInferenceServer(const std::string& listen,
                                                   const std::vector<grpc::Service*>& services, int* bound_port);

}  // namespace dtrain::inference
