// The gRPC credentials of every dtrain server and channel, from one place, so that
// securing the cluster is a change here rather than at each call site.
//
// Plaintext today. Mutual TLS plugs in here later: grpc::SslServerCredentials and
// grpc::SslCredentials built from --tls-cert, --tls-key and --tls-ca (the CA also
// checks the peer's certificate), with an options struct carrying those paths.
#pragma once

#include <memory>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

namespace dtrain {

// For grpc::ServerBuilder::AddListeningPort.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials();

// For grpc::CreateCustomChannel (see MakeChannel in grpc_util.h).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials();

}  // namespace dtrain
