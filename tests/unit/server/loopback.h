// For the server's tests: the real ParameterServer service on 127.0.0.1:0 over a
// ShardStore the test can inspect, and real PsClients.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/kv/shard_store.h"
#include "gtest/gtest.h"
#include "services/server/ps_service.h"
#include "services/worker/kv/ps_client.h"

namespace dtrain::server {

inline constexpr absl::Duration kRpc = absl::Seconds(5);

class Loopback {
 public:
  explicit Loopback(PsServiceOptions options = {}) : service_(&store_, options) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~Loopback() { Stop(); }

  void Stop() {
    if (server_ == nullptr) return;
    server_->Shutdown(DeadlineAfter(absl::Milliseconds(100)));
    server_.reset();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  bool ok() const { return server_ != nullptr && port_ > 0; }

  std::unique_ptr<worker::PsClient> Connect(int worker_rank, int server_rank = 0) {
    absl::StatusOr<std::unique_ptr<worker::PsClient>> c =
        worker::PsClient::Connect(address(), server_rank, worker_rank, absl::Seconds(5));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  kv::ShardStore store_;

 private:
  PsService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

inline kv::OptimizerOptions Sgd(double lr) {
  kv::OptimizerOptions o;
  o.learning_rate = lr;
  return o;
}

inline kv::KeyState Key(uint64_t key, std::vector<float> values) {
  kv::KeyState k;
  k.key = key;
  k.shape = {static_cast<int64_t>(values.size())};
  k.values = std::move(values);
  return k;
}

inline absl::Time Soon() { return absl::Now() + kRpc; }

}  // namespace dtrain::server
