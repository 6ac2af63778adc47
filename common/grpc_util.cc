#include "common/grpc_util.h"

#include "absl/time/clock.h"
#include "common/credentials.h"
#include "common/listen_failure.h"
#include "common/log.h"
#include "common/socket_tuning.h"

namespace dtrain {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration d) { return absl::ToChronoTime(absl::Now() + d); }

namespace {

// Long against a loaded machine's scheduling delays, short against the heartbeat's
// reconnect window (10 s) that an attempt hanging on a vanished peer would eat into.
constexpr int kConnectAttemptMs = 5000;

// Tensor streams move megabytes per message: large HTTP/2 frames and a large
// flow-control window keep a 4 MB chunk from being cut into 16 KB frames and stalled
// on window updates.
template <typename Setter>
void SetBulkTransportArgs(Setter set) {
  set(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);
  set(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 20);
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  SetBulkTransportArgs([&](const char* k, int v) { args.SetInt(k, v); });
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Detect a dead peer on an idle long-lived stream within ~20 s.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Separate channels per (worker, server) pair must not be merged into one TCP connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Nodes often start before their peer listens; gRPC's default backoff grows to
  // 120 s, which would make a launch wait long after the peer is up.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Despite its name, gRPC takes this as the least time one connection attempt (TCP
  // connect and the peer's HTTP/2 SETTINGS) is given: MIN_CONNECT_TIMEOUT in gRPC's
  // doc/connection-backoff.md. At 100 ms a busy peer or a loaded machine failed attempts
  // ("connection attempt timed out before receiving SETTINGS frame"), and with them the
  // calls that do not wait for ready. An attempt that is refused still fails at once.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kConnectAttemptMs);
  // A peer restarted elsewhere under the same name (a Kubernetes pod behind its headless
  // Service) has a new address: look the name up again within a second, not 30 s.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  SetSocketTuning(args);
  return grpc::CreateCustomChannel(address, ChannelCredentials(), args);
}

void ConfigureServerBuilder(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  SetBulkTransportArgs([&](const char* k, int v) { builder.AddChannelArgument(k, v); });
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  // gRPC sets SO_REUSEPORT by default: a second scheduler on the same port would
  // start "fine" and the kernel would split the nodes between the two. A port is
  // one service's.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  SetSocketTuning(builder);
}

std::unique_ptr<grpc::Server> StartGrpcServer(const std::string& listen, grpc::Service* service, int* bound_port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  builder.AddListeningPort(listen, ServerCredentials(), bound_port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0) {
    DTRAIN_LOG(ERROR) << DescribeListenFailure(listen);
    return nullptr;
  }
  return server;
}

}  // namespace dtrain
