// A worker's keys spread over several connections to one server (StripedChannel,
// ConnectPsClients): each connection is a TCP connection of its own, keys are shared out
// by size and keep their connection, and the server's weights are bit-identical to
// those of one connection per worker.
#include "services/worker/kv/striped_channel.h"

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_util.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/server/ps_service.h"
#include "tests/unit/server/loopback.h"

namespace dtrain::server {
namespace {

using worker::ConnectPsClients;
using worker::KeyRequest;
using worker::ServerChannel;
using worker::StripedChannel;

// Records the peer (the client's ip:port: one per TCP connection) of every PushPull
// stream opened to the server.
class PushPullPeers final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new Recorder(this, info);
  }

  std::set<std::string> peers() {
    absl::MutexLock lock(&mu_);
    return peers_;
  }

 private:
  class Recorder final : public grpc::experimental::Interceptor {
   public:
    Recorder(PushPullPeers* owner, grpc::experimental::ServerRpcInfo* info) : owner_(owner), info_(info) {}
    void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
      if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::POST_RECV_INITIAL_METADATA) &&
          std::string(info_->method()) == "/dtrain.v1.ParameterServer/PushPull") {
        absl::MutexLock lock(&owner_->mu_);
        owner_->peers_.insert(info_->server_context()->peer());
      }
      methods->Proceed();
    }

   private:
    PushPullPeers* owner_;
    grpc::experimental::ServerRpcInfo* info_;
  };

  absl::Mutex mu_;
  std::set<std::string> peers_ ABSL_GUARDED_BY(mu_);
};

// The real ParameterServer service on 127.0.0.1:0, recording its PushPull peers.
class Server {
 public:
  Server() : service_(&store_, {}) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    auto peers = std::make_unique<PushPullPeers>();
    peers_ = peers.get();
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::move(peers));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server_ = builder.BuildAndStart();
  }
  ~Server() { server_->Shutdown(DeadlineAfter(absl::Milliseconds(100))); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  std::set<std::string> peers() { return peers_->peers(); }

  std::unique_ptr<ServerChannel> Connect(int worker_rank, int connections) {
    auto c = ConnectPsClients(0, address(), worker_rank, absl::Seconds(5), connections);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

 private:
  kv::ShardStore store_;
  PsService service_;
  PushPullPeers* peers_ = nullptr;  // owned by the server
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Keys of different sizes, so that how they are shared out matters.
const std::vector<int64_t> kSizes = {1000, 10, 10, 10, 990, 257};

std::vector<kv::KeyState> Keys() {
  std::vector<kv::KeyState> keys;
  for (size_t k = 0; k < kSizes.size(); ++k) {
    std::vector<float> v(kSizes[k]);
    for (int64_t i = 0; i < kSizes[k]; ++i) v[i] = 0.25f + 0.001f * static_cast<float>(i % 97) + k;
    keys.push_back(Key(k, std::move(v)));
  }
  return keys;
}

// Runs `steps` sync steps of connections.size() workers, worker r over connections[r],
// and returns each worker's pulled weights of every key after the last step.
std::vector<std::vector<std::vector<float>>> Train(Server& server, const std::vector<int>& connections, int steps) {
  const int n = static_cast<int>(connections.size());
  std::vector<std::unique_ptr<ServerChannel>> w;
  for (int r = 0; r < n; ++r) {
    w.push_back(server.Connect(r, connections[r]));
    if (w.back() == nullptr) return {};
  }
  EXPECT_TRUE(w[0]->Configure(KVStoreMode::kDistSync, n, Sgd(0.1), kRpc).ok());
  EXPECT_TRUE(w[0]->InitKeys(Keys(), kRpc).ok());
  std::vector<std::vector<std::vector<float>>> out(n, std::vector<std::vector<float>>(kSizes.size()));
  std::vector<std::vector<std::vector<float>>> grads = out;
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<ServerChannel::Ticket>> tickets(n);
    for (int r = 0; r < n; ++r) {
      for (size_t k = 0; k < kSizes.size(); ++k) {
        // Of very different magnitudes, so that their float sum depends on the order
        // of addition: only the server's rank order gives the same weights every time.
        grads[r][k].resize(kSizes[k]);
        for (int64_t i = 0; i < kSizes[k]; ++i) {
          grads[r][k][i] = 1e-3f / static_cast<float>(1 + i + step * 3) + (r == 1 ? 1e4f : r == 2 ? -1e4f : 0);
        }
        out[r][k].assign(kSizes[k], 0);
        tickets[r].push_back(
            w[r]->Submit(KeyRequest::PushPull(step, k, grads[r][k].data(), out[r][k].data(), kSizes[k])));
      }
    }
    for (int r = 0; r < n; ++r) {
      for (ServerChannel::Ticket t : tickets[r]) EXPECT_TRUE(w[r]->Wait(t, Soon()).ok());
    }
  }
  return out;
}

TEST(StripedChannelTest, EachConnectionIsATcpConnectionOfItsOwn) {
  Server server;
  ASSERT_TRUE(server.ok());
  ASSERT_FALSE(Train(server, {3, 1}, 1).empty());
  EXPECT_EQ(server.peers().size(), 4u) << "worker 0's 3 connections and worker 1's one, each its own TCP peer";
}

TEST(StripedChannelTest, WeightsAreBitIdenticalToOneConnection) {
  Server one, striped;
  ASSERT_TRUE(one.ok() && striped.ok());
  const auto want = Train(one, {1, 1, 1}, 3);
  const auto got = Train(striped, {3, 2, 1}, 3);
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(got.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    for (size_t k = 0; k < kSizes.size(); ++k) {
      ASSERT_EQ(got[r][k].size(), want[r][k].size());
      EXPECT_EQ(std::memcmp(got[r][k].data(), want[r][k].data(), want[r][k].size() * sizeof(float)), 0)
          << "worker " << r << " key " << k;
    }
  }
  EXPECT_EQ(striped.peers().size(), 6u);
}

TEST(StripedChannelTest, KeysGoToTheLeastLoadedConnectionAndStayThere) {
  Server server;
  ASSERT_TRUE(server.ok());
  std::unique_ptr<ServerChannel> c = server.Connect(0, 2);
  ASSERT_NE(c, nullptr);
  auto* striped = dynamic_cast<StripedChannel*>(c.get());
  ASSERT_NE(striped, nullptr) << "two connections make a StripedChannel";
  ASSERT_TRUE(c->Configure(KVStoreMode::kDistSync, 1, Sgd(0.1), kRpc).ok());
  ASSERT_TRUE(c->InitKeys(Keys(), kRpc).ok());
  std::vector<std::vector<float>> out(kSizes.size());
  std::vector<ServerChannel::Ticket> tickets;
  for (size_t k = 0; k < kSizes.size(); ++k) {
    out[k].assign(kSizes[k], 0);
    tickets.push_back(c->Submit(KeyRequest::Pull(k, 0, out[k].data(), kSizes[k])));
  }
  // 1000 -> 0; 10, 10, 10, 990 -> 1 (30 < 1000); 257 -> 0 (1000 < 1020).
  EXPECT_THAT((std::vector<int>{striped->ConnectionOf(0), striped->ConnectionOf(1), striped->ConnectionOf(2),
                                striped->ConnectionOf(3), striped->ConnectionOf(4), striped->ConnectionOf(5)}),
              ::testing::ElementsAre(0, 1, 1, 1, 1, 0));
  EXPECT_EQ(striped->ConnectionOf(77), -1);
  for (ServerChannel::Ticket t : tickets) ASSERT_TRUE(c->Wait(t, Soon()).ok());
  EXPECT_EQ(out[4][0], Keys()[4].values[0]);
  EXPECT_EQ(c->bytes_pulled(), 4 * (1000 + 30 + 990 + 257));
  // A key keeps its connection, whatever the load since.
  const ServerChannel::Ticket again = c->Submit(KeyRequest::Pull(5, 0, out[5].data(), kSizes[5]));
  EXPECT_EQ(striped->ConnectionOf(5), 0);
  ASSERT_TRUE(c->Wait(again, Soon()).ok());
  // Tickets are waited for once; unknown ones are refused, as by one connection.
  EXPECT_EQ(c->Wait(again, Soon()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c->Wait(1, Soon()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->WaitUntil(again, Soon())) << "a ticket already collected has nothing to wait for";
}

TEST(StripedChannelTest, RefusesFewerThanOneConnection) {
  auto c = ConnectPsClients(0, "127.0.0.1:1", 0, absl::ZeroDuration(), 0);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), ::testing::HasSubstr("at least 1, not 0"));
}

}  // namespace
}  // namespace dtrain::server
