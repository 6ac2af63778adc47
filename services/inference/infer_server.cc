#include "services/inference/infer_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include "common/credentials.h"
#include "common/grpc_util.h"
#include "common/listen_failure.h"
#include "common/log.h"
#include "services/inference/reflection_v1.h"

namespace dtrain::inference {

std::unique_ptr<grpc::Server> StartInferenceServer(const std::string& listen, const std::vector<grpc::Service*>& services,
                                                   int* bound_port) {
  // v1alpha: gRPC's own plugin, registered process-wide for every later builder.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  AddReflectionV1(builder);
  builder.AddListeningPort(listen, ServerCredentials(), bound_port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0) {
    DTRAIN_LOG(ERROR) << DescribeListenFailure(listen);
    return nullptr;
  }
  return server;
}

}  // namespace dtrain::inference
