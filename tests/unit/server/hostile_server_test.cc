// The worker's end of the PushPull wire against a hostile server: a response whose
// payload length announces bytes that are not there must fail that ticket with a clear
// error, never allocate what it announces or crash the worker.
#include <memory>
#include <string>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/kv/tensor_codec.h"
#include "dtrain/v1/parameter_server.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/kv/ps_client.h"

namespace dtrain::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Answers every PushPull request with its request_id, then a `data` field announcing
// 2^31 bytes and none of them.
class LyingServer final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* /*ctx*/) override {
    return new Reactor();
  }

 private:
  class Reactor final : public grpc::ServerGenericBidiReactor {
   public:
    Reactor() { StartRead(&in_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      v1::PushPullRequest req;
      (void)kv::DecodeWithPayload(&in_, &req, v1::PushPullRequest::kDataFieldNumber, nullptr);
      v1::PushPullResponse resp;
      resp.set_request_id(req.request_id());
      resp.set_key(req.key());
      resp.set_version(1);
      std::string bytes = resp.SerializeAsString();
      bytes.append("\x32\x80\x80\x80\x80\x08", 6);  // field 6 (data), length 2^31
      grpc::Slice slice(bytes);
      out_ = grpc::ByteBuffer(&slice, 1);
      StartWrite(&out_);
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::CANCELLED);
        return;
      }
      StartRead(&in_);
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer in_, out_;
  };
};

TEST(HostileServerTest, AResponseAnnouncingMissingBytesFailsTheTicketClearly) {
  LyingServer service;
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server != nullptr && port > 0);
  auto client = worker::PsClient::Connect(absl::StrCat("127.0.0.1:", port), 0, 0, absl::Seconds(5));
  ASSERT_TRUE(client.ok()) << client.status();
  float out[4] = {7, 7, 7, 7};
  for (int i = 0; i < 2; ++i) {  // the stream survives the first
    const absl::Status s =
        (*client)->Wait((*client)->Submit(worker::KeyRequest::Pull(3, 0, out, 4)), absl::Now() + absl::Seconds(5));
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr("pull of key 3: malformed response"),
                      HasSubstr("payload of 2147483648 bytes announced but only 0 bytes follow")));
  }
  EXPECT_EQ(out[0], 7) << "nothing may be written for bytes that never came";
  client->reset();
  server->Shutdown(DeadlineAfter(absl::Milliseconds(100)));
}

}  // namespace
}  // namespace dtrain::server
