#include "services/inference/infer_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include "common/credentials.h"
#include "common/grpc_util.h"
#include "common/listen_failure.h"
#include "common/log.h"
#include "services/inference/reflection_v1.h"

namespace dtrain::inference {
namespace {

// gRPC's sync server keeps at most MAX_POLLERS idle threads (default 2) and starts a new
// thread for a call whenever none is idle. A Predict blocks its thread in the batching
// queue, so with more concurrent callers than that every finished call's thread exits
// and the next call starts a fresh one: measured with 8 clients, a thread was created
// and torn down for every second call (clone, stack, TLS, exit: tens of microseconds
// each, on the cores the forwards need). Threads that finish a call now stay, up to
// this many; a burst beyond it still works, with the old churn.
constexpr int kMaxIdleCallThreads = 64;

}  // namespace

std::unique_ptr<grpc::Server> StartInferenceServer(const std::string& listen,
                                                   const std::vector<grpc::Service*>& services, int* bound_port) {
  // v1alpha: gRPC's own plugin, registered process-wide for every later builder.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxIdleCallThreads);
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
