// Test helpers for TLS: certificates made by `dtrain certs`, and clients with chosen
// credentials (the right ones, none, another CA's, plaintext) that try one RPC.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "common/credentials.h"

namespace dtrain::testing {

// `dtrain certs --dir DIR --job JOB -n W -s S --names client,operator`; fails the test if it does not exit 0.
void MakeCerts(const std::string& dir, const std::string& job, int workers, int servers);

// TLS credentials from DIR/ca.crt and DIR/STEM.{crt,key} (no certificate when `stem` is empty).
TransportSecurity TlsFrom(const std::string& ca_dir, const std::string& cert_dir, const std::string& stem);

// A channel to `address` with `creds` over a connection of its own (never another
// test client's).
std::shared_ptr<grpc::Channel> Dial(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds);

// One Scheduler.GetStatus call to `address` with `creds`, 5 s deadline.
grpc::Status CallScheduler(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds);

// One ParameterServer.GetVersions call to `address` with `creds`, 5 s deadline.
grpc::Status CallServer(const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& creds);

}  // namespace dtrain::testing
