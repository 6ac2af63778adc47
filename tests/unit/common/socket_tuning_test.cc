// Every gRPC socket dtrain opens or accepts gets TCP_NOTSENT_LOWAT, and the congestion
// control --tcp-congestion names (common/socket_tuning.h): a real server and channel on
// loopback, the options set and read back on the dialling socket, the listener and the
// accepted one; a socket without TCP options (a Unix socket) still connects.
#include <unistd.h>

#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/socket_tuning.h"
#include "dtrain/v1/scheduler.grpc.pb.h"

namespace dtrain {
namespace {

// Connects a channel made as every node makes them and makes one call: the service does not
// implement it, which proves the connection carried a call.
grpc::StatusCode CallOver(const std::string& address) {
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
  EXPECT_TRUE(channel->WaitForConnected(DeadlineAfter(absl::Seconds(10)))) << address;
  auto stub = v1::Scheduler::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(10)));
  v1::RegisterRequest req;
  v1::RegisterResponse resp;
  return stub->Register(&ctx, req, &resp).error_code();
}

// Serves `service` on loopback as every node does and makes one call to it over a new
// channel, so that a listener, a dialling socket and an accepted one were all made; the
// server is returned running (null if it did not start).
std::unique_ptr<grpc::Server> ServeAndCallOnce(v1::Scheduler::Service* service) {
  int port = 0;
  std::unique_ptr<grpc::Server> server = StartGrpcServer("127.0.0.1:0", service, &port);
  EXPECT_NE(server, nullptr);
  if (server != nullptr) EXPECT_EQ(CallOver(absl::StrCat("127.0.0.1:", port)), grpc::StatusCode::UNIMPLEMENTED);
  return server;
}

TEST(SocketTuningTest, EveryTcpSocketOfAServerAndAChannelGetsTheOption) {
  const SocketTuningCounts before = SocketsTuned();
  v1::Scheduler::Service service;  // every method UNIMPLEMENTED
  std::unique_ptr<grpc::Server> server = ServeAndCallOnce(&service);
  ASSERT_NE(server, nullptr);
  const SocketTuningCounts after = SocketsTuned();
  EXPECT_GE(after.server_listeners - before.server_listeners, 1);
  EXPECT_GE(after.client_connections - before.client_connections, 1);
  EXPECT_GE(after.server_connections - before.server_connections, 1);
  EXPECT_EQ(after.refused, before.refused);
  server->Shutdown(DeadlineAfter(absl::Seconds(1)));
}

TEST(SocketTuningTest, ASocketWithoutTcpOptionsStillConnects) {
  // Abstract: no file, and no limit from the test directory's path length (108 bytes).
  const std::string address = absl::StrCat("unix-abstract:dtrain-socket-tuning-", getpid());
  const SocketTuningCounts before = SocketsTuned();
  v1::Scheduler::Service service;
  int port = 0;
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(CallOver(address), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_GT(SocketsTuned().refused, before.refused);
  server->Shutdown(DeadlineAfter(absl::Seconds(1)));
}

// --tcp-congestion: every socket of a server and a channel made after it is set takes the
// algorithm (read back on each); reno is one every Linux allows without privileges.
TEST(SocketTuningTest, ACongestionControlSetReachesEverySocketMadeAfter) {
  ASSERT_TRUE(SetTcpCongestion("reno").ok());
  const SocketTuningCounts before = SocketsTuned();
  v1::Scheduler::Service service;
  std::unique_ptr<grpc::Server> server = ServeAndCallOnce(&service);
  ASSERT_NE(server, nullptr);
  const SocketTuningCounts after = SocketsTuned();
  // The listener, the dialling socket and the accepted one.
  EXPECT_GE(after.congestion_set - before.congestion_set, 3);
  EXPECT_EQ(after.refused, before.refused);
  server->Shutdown(DeadlineAfter(absl::Seconds(1)));
  ASSERT_TRUE(SetTcpCongestion("").ok());
  const SocketTuningCounts unset = SocketsTuned();
  std::unique_ptr<grpc::Server> again = ServeAndCallOnce(&service);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(SocketsTuned().congestion_set, unset.congestion_set) << "unset: the system's, untouched";
  again->Shutdown(DeadlineAfter(absl::Seconds(1)));
}

TEST(SocketTuningTest, ACongestionControlTheKernelRefusesIsABadFlagNamingWhatItAllows) {
  const absl::Status s = SetTcpCongestion("no-such-cc");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--tcp-congestion no-such-cc"), std::string::npos) << s;
  EXPECT_NE(s.message().find("allowed here: "), std::string::npos) << s;
  EXPECT_NE(s.message().find("reno"), std::string::npos) << s;
}

}  // namespace
}  // namespace dtrain
