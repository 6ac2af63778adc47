// Calls a hostile holder of a valid certificate of the job's CA would make: acting as
// another rank, with no token, another node's token, or a replaced incarnation's
// (docs/security.md, "Identity bound to rank"). Each makes one real RPC over its own
// connection with `creds`, sends `token` as the x-dtrain-token metadata when it is not
// empty, and returns what the service answered (5 s deadline).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::testing {

using Creds = std::shared_ptr<grpc::ChannelCredentials>;

// Register(role, requested rank). Refused at once when refused at all; an admitted
// one would wait for the rest of the job, so its deadline is short (3 s).
grpc::Status RegisterAs(const std::string& scheduler, const Creds& creds, v1::Role role, int rank);
// Leave(role, rank, incarnation, failed=true, "attack").
grpc::Status LeaveAs(const std::string& scheduler, const Creds& creds, const std::string& token, v1::Role role,
                     int rank, uint64_t incarnation);
// A Heartbeat stream with one request in the name of (role, rank, incarnation), then
// closed: the stream's final status.
grpc::Status HeartbeatAs(const std::string& scheduler, const Creds& creds, const std::string& token, v1::Role role,
                         int rank, uint64_t incarnation);
grpc::Status GetStatusWith(const std::string& scheduler, const Creds& creds, const std::string& token);

// GetState of every key, read to the end: the stream's status; *keys counts the keys read.
grpc::Status GetStateWith(const std::string& server, const Creds& creds, const std::string& token, int* keys);
// Configure(dist_sync, 2 workers, sgd lr 100): a hijack of the job's optimizer.
grpc::Status ConfigureWith(const std::string& server, const Creds& creds, const std::string& token);
// One push of a NaN gradient for key 0 at step 0 in the name of (rank, incarnation):
// the answer's code and message, or the stream's status if it ended without one.
grpc::Status PushNanAs(const std::string& server, const Creds& creds, const std::string& token, int rank,
                       uint64_t incarnation);

}  // namespace dtrain::testing
