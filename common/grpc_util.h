// Small bridges between absl and gRPC: status conversion, deadlines, channels.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dtrain {

// absl::StatusCode and grpc::StatusCode share their numbering.
absl::Status FromGrpc(const grpc::Status& s);
grpc::Status ToGrpc(const absl::Status& s);

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration d);

// A channel (credentials from common/credentials.h) with dtrain's message size limits and keepalive settings.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Applies the same limits to a server, and refuses to share its port (no SO_REUSEPORT).
void ConfigureServerBuilder(grpc::ServerBuilder& builder);

// Serves `service` on `listen` (host:port; port 0: any free one) with the standard
// health service, dtrain's limits and the job's credentials, and sets *bound_port.
// Null when it cannot listen, logged with the reason: "cannot listen on 0.0.0.0:9091:
// the address is already in use by pid 4242 (dtrain-scheduler)".
std::unique_ptr<grpc::Server> StartGrpcServer(const std::string& listen, grpc::Service* service, int* bound_port);

// Largest message either side accepts: a 4 MB key chunk plus its optimizer state
// fits with room; whole-model messages are never sent.
inline constexpr int kMaxMessageBytes = 64 << 20;

}  // namespace dtrain
