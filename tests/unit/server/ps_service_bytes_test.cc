// InitKeys' checks on its `bytes` fields, through the real service on 127.0.0.1:0 and
// the generated stub (a worker's PsClient never sends such bytes).
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/credentials.h"
#include "common/grpc_util.h"
#include "common/kv/shard_store.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"
#include "gtest/gtest.h"
#include "services/server/ps_service.h"

namespace dtrain::server {
namespace {

class PsServiceBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kv::StoreConfig config;
    config.num_workers = 1;
    ASSERT_TRUE(store_.Configure(config).ok());
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    builder.AddListeningPort("127.0.0.1:0", ServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr && port_ > 0);
    stub_ = v1::ParameterServer::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", port_)));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(DeadlineAfter(absl::Milliseconds(100)));
  }

  grpc::Status InitKey(const std::string& values, const std::string& state) {
    v1::InitKeysRequest req;
    v1::KeyInit* k = req.add_keys();
    k->set_key(3);
    k->add_shape(1);
    k->set_dtype(v1::DTYPE_FLOAT32);
    k->set_values(values);
    k->set_optimizer_state(state);
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(absl::Seconds(5)));
    v1::InitKeysResponse resp;
    return stub_->InitKeys(&ctx, req, &resp);
  }

  kv::ShardStore store_;
  PsService service_{&store_, PsServiceOptions()};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(PsServiceBytesTest, BytesThatAreNotWholeFloatsNameTheKeyAndField) {
  grpc::Status s = InitKey(std::string(6, '\0'), "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "key 3: values has 6 bytes, not a whole number of float32s");
  s = InitKey(std::string(4, '\0'), std::string(3, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "key 3: optimizer_state has 3 bytes, not a whole number of float32s");
  EXPECT_EQ(store_.num_keys(), 0);
}

TEST_F(PsServiceBytesTest, WholeFloatsAreStored) {
  const float one = 1.0f;
  ASSERT_TRUE(InitKey(std::string(reinterpret_cast<const char*>(&one), 4), "").ok());
  std::vector<kv::KeyState> snap;
  ASSERT_TRUE(store_.Snapshot({3}, &snap).ok());
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].values, std::vector<float>{1.0f});
}

TEST_F(PsServiceBytesTest, NonFiniteInitialValuesAreRefused) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  grpc::Status s = InitKey(std::string(reinterpret_cast<const char*>(&nan), 4), "");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "key 3: values element 0 is nan (dtrain-server --allow-non-finite accepts it)");
  EXPECT_EQ(store_.num_keys(), 0);
}

TEST_F(PsServiceBytesTest, HugeConfigureStringsAndListsAreRefusedWithoutBeingEchoed) {
  v1::ConfigureRequest req;
  req.set_kv_store(std::string(1 << 20, 'x'));
  req.set_num_workers(1);
  v1::ConfigureResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(5)));
  grpc::Status s = stub_->Configure(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "kv_store has 1048576 bytes (want dist_sync, dist_device_sync or dist_async)");
  req.set_kv_store("dist_sync");
  for (int i = 1; i <= 20000; ++i) req.mutable_optimizer()->add_lr_steps(i);
  grpc::ClientContext ctx2;
  ctx2.set_deadline(DeadlineAfter(absl::Seconds(5)));
  s = stub_->Configure(&ctx2, req, &resp);
  EXPECT_EQ(s.error_message(), "optimizer.lr_steps has 20000 entries, over the cap of 10000");
}

TEST_F(PsServiceBytesTest, GetStateAskingForMoreKeysThanHeldIsRefused) {
  const float one = 1.0f;
  ASSERT_TRUE(InitKey(std::string(reinterpret_cast<const char*>(&one), 4), "").ok());
  v1::GetStateRequest req;
  for (int i = 0; i < 100000; ++i) req.add_keys(3);  // one key asked for 100000 times
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(absl::Seconds(5)));
  auto reader = stub_->GetState(&ctx, req);
  v1::KeyState ks;
  int read = 0;
  while (reader->Read(&ks)) ++read;
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "GetState asks for 100000 keys but this server holds 1");
  EXPECT_EQ(read, 0);
}

}  // namespace
}  // namespace dtrain::server
