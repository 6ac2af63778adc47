// Socket options for every gRPC connection dtrain opens or accepts.
//
// TCP_NOTSENT_LOWAT: the kernel holds at most this many bytes of a connection that are
// not yet sent. Without it a socket takes up to its whole send buffer (4 MB here) ahead
// of the wire, so the order the sender chose (lowest key first, a worker's keys spread
// over every server) is lost in queues the kernel drains in whatever order its flows
// win the link: with 4 workers and 4 servers on 250 Mbit/s links the servers waited for
// the last worker's copy of each key, and a step's answers trailed its pushes by a third
// of a second (docs/benchmarks-network.md, "More workers"). Bytes in flight are not
// capped, so fast links with long round trips keep their full window.
//
// TCP_CONGESTION (--tcp-congestion, DTRAIN_TCP_CONGESTION; unset: the system's): a worker
// keeps a stream to every server busy at once, and the step ends with the last of them.
// Under bbr, which paces each flow at the share it last measured, the streams still
// running when the others finish took several round trips to fill the link again; with 4
// workers and 4 servers at 250 Mbit/s the wide mlp ran at 1.13x DDP on bbr hosts, and at
// 1.42x with dtrain's own sockets on reno (DDP's stayed on bbr, at the same speed both
// ways; docs/benchmarks-network.md, "More workers").
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

#include <grpcpp/grpcpp.h>

namespace dtrain {

inline constexpr int kNotSentLowWaterBytes = 128 << 10;

// Every socket of the channel made with `args` gets the options above.
void SetSocketTuning(grpc::ChannelArguments& args);

// Every socket the server built by `builder` listens or accepts on gets them.
void SetSocketTuning(grpc::ServerBuilder& builder);

// Sockets of this process whose options were set and read back, by how gRPC uses them,
// and those that refused (a Unix socket has no TCP options; the connection goes on).
struct SocketTuningCounts {
  int64_t client_connections = 0;
  int64_t server_listeners = 0;
  int64_t server_connections = 0;
  int64_t refused = 0;
  int64_t congestion_set = 0;  // sockets that took SetTcpCongestion's algorithm (read back)
};
SocketTuningCounts SocketsTuned();

// Every TCP socket of this process's gRPC servers and channels made from now on uses the
// congestion control `name` ("": the system's, net.ipv4.tcp_congestion_control).
// INVALID_ARGUMENT naming what this kernel allows when it refuses `name` (tried on a
// socket of its own first; an unprivileged process may use only
// net.ipv4.tcp_allowed_congestion_control). A socket that refuses it later keeps the
// system's and its connection goes on.
absl::Status SetTcpCongestion(const std::string& name);

}  // namespace dtrain
