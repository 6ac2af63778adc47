// gRPC server reflection v1 (grpc.reflection.v1.ServerReflection), beside the v1alpha
// service that Debian's grpc++ 1.51 reflection library provides. Newer clients
// (grpcurl, grpc-java, Postman) ask for v1 first. Both answer from the same source, the
// process's generated descriptor pool, and list the same services: the server's own
// list, read once it is built.
//
// Added to a ServerBuilder as an option (AddReflectionV1), which installs a builder
// plugin: the plugin registers the service and, when the server is built, hands it the
// server's service list. No process-wide plugin registration is involved.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace dtrain::inference {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // The names ListServices answers; the server owns the list and outlives this call's
  // users. Null (before the server is built): an empty list.
  void SetServiceList(const std::vector<std::string>* services) { services_.store(services); }

  // One answer per request until the client half-closes. Unknown files or symbols are
  // answered with an error_response (NOT_FOUND), the stream going on; an unset request
  // with INVALID_ARGUMENT.
  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

 private:
  // Set once the server is built, possibly while a first call runs.
  std::atomic<const std::vector<std::string>*> services_{nullptr};
};

// Serves ReflectionV1Service on the server `builder` builds.
void AddReflectionV1(grpc::ServerBuilder& builder);

}  // namespace dtrain::inference
