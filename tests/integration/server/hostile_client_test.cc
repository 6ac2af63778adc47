// A real dtrain-server process against a hostile client: the exact bytes that used to
// crash it or make it hold gigabytes, sent as raw gRPC ByteBuffers over a real socket.
// After each attack the server must still run, answer, and keep its memory bounded.
//
// DTRAIN_HOSTILE_BIN_DIR=/path/to/bin runs it against other binaries (e.g. an old
// build, to see these tests fail there).
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/grpc_util.h"
#include "common/kv/tensor_codec.h"
#include "dtrain/v1/parameter_server.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/unit/common/metrics/http_get.h"

namespace dtrain::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kPushPull[] = "/dtrain.v1.ParameterServer/PushPull";
constexpr absl::Duration kRpc = absl::Seconds(10);

std::string ServerBin() {
  const char* dir = std::getenv("DTRAIN_HOSTILE_BIN_DIR");
  return dir != nullptr ? std::string(dir) + "/dtrain-server" : Bin("dtrain-server");
}

int ReadPort(const std::string& path, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      int port = 0;
      const bool ok = std::fscanf(f, "%d", &port) == 1;
      std::fclose(f);
      if (ok && port > 0) return port;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return 0;
}

// VmRSS of `pid` in bytes, from /proc/PID/status (-1 if gone).
int64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

grpc::ByteBuffer Buffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

using RawStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

class HostileClientTest : public ::testing::Test {
 protected:
  // Starts dtrain-server standalone with `extra` flags and a metrics endpoint.
  void Start(std::vector<std::string> extra = {}) {
    dir_ = MakeTempDir();
    std::vector<std::string> argv = {ServerBin(),           "--standalone",        "--port",         "0",
                                     "--port-file",         dir_ + "/port",        "--metrics-port", "0",
                                     "--metrics-port-file", dir_ + "/metrics-port"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<Subprocess>(argv);
    const int port = ReadPort(dir_ + "/port", absl::Seconds(20));
    ASSERT_GT(port, 0) << server_->output();
    metrics_port_ = ReadPort(dir_ + "/metrics-port", absl::Seconds(5));
    ASSERT_GT(metrics_port_, 0) << server_->output();
    channel_ = MakeChannel(absl::StrCat("127.0.0.1:", port));
    ASSERT_TRUE(channel_->WaitForConnected(DeadlineAfter(kRpc)));
    stub_ = v1::ParameterServer::NewStub(channel_);
  }

  void TearDown() override {
    // Open streams would hold the server's shutdown for its grace period.
    for (auto& open : streams_) open.ctx->TryCancel();
    streams_.clear();
    stub_.reset();
    channel_.reset();
    if (server_ != nullptr && server_->running()) {
      server_->Signal(SIGTERM);
      server_->Wait(absl::Seconds(10));
    }
  }

  // A raw PushPull stream: bytes in, bytes out, nothing checked on our side. Lives
  // until TearDown; *ctx (when asked for) cancels it.
  RawStream* OpenStream(grpc::ClientContext** ctx = nullptr) {
    OpenRaw open;
    open.ctx = std::make_unique<grpc::ClientContext>();
    open.ctx->set_deadline(DeadlineAfter(absl::Seconds(60)));
    open.stream.reset(grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
        channel_.get(), grpc::internal::RpcMethod(kPushPull, grpc::internal::RpcMethod::BIDI_STREAMING),
        open.ctx.get()));
    if (ctx != nullptr) *ctx = open.ctx.get();
    streams_.push_back(std::move(open));
    return streams_.back().stream.get();
  }

  // Writes `bytes` on `stream` and reads one answer.
  v1::PushPullResponse RoundTrip(RawStream* stream, const std::string& bytes) {
    v1::PushPullResponse resp;
    EXPECT_TRUE(stream->Write(Buffer(bytes))) << "write failed; server output:\n" << server_->output();
    grpc::ByteBuffer answer;
    if (!stream->Read(&answer)) {
      ADD_FAILURE() << "no answer; server " << (server_->running() ? "running" : "GONE") << ", output:\n"
                    << server_->output();
      return resp;
    }
    EXPECT_TRUE(kv::DecodeWithPayload(&answer, &resp, v1::PushPullResponse::kDataFieldNumber, nullptr).ok());
    return resp;
  }

  grpc::Status Configure(int num_workers) {
    v1::ConfigureRequest req;
    req.set_kv_store("dist_sync");
    req.set_num_workers(num_workers);
    req.mutable_optimizer()->set_learning_rate(0.1);
    v1::ConfigureResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(kRpc));
    return stub_->Configure(&ctx, req, &resp);
  }

  grpc::Status InitKeys(const std::vector<std::pair<uint64_t, int64_t>>& keys_and_sizes) {
    v1::InitKeysRequest req;
    for (const auto& [key, n] : keys_and_sizes) {
      v1::KeyInit* k = req.add_keys();
      k->set_key(key);
      k->add_shape(n);
      k->set_dtype(v1::DTYPE_FLOAT32);
      k->set_values(std::string(static_cast<size_t>(n) * 4, '\0'));
    }
    v1::InitKeysResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(kRpc));
    return stub_->InitKeys(&ctx, req, &resp);
  }

  // The server is alive and answers a real RPC.
  void ExpectAliveAndAnswering() {
    if (!server_->running()) {
      const int code = server_->Wait(absl::Seconds(1));
      FAIL() << "dtrain-server died (exit " << code << (code > 128 ? ": signal " : "")
             << (code > 128 ? std::to_string(code - 128) : "") << "), output:\n"
             << server_->output();
    }
    v1::GetStateRequest req;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAfter(kRpc));
    auto reader = stub_->GetState(&ctx, req);
    v1::KeyState ks;
    while (reader->Read(&ks)) {
    }
    const grpc::Status s = reader->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
  }

  // The value of the series of `name` on the server's /metrics page (-1: absent).
  double Metric(const std::string& name) {
    absl::StatusOr<HttpResponse> r = HttpGet(metrics_port_, "/metrics");
    if (!r.ok()) return -1;
    for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
      if (!absl::StartsWith(line, name) || line.size() <= name.size()) continue;
      if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
      double v = 0;
      if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) return v;
    }
    return -1;
  }

  bool MetricReaches(const std::string& name, double value, absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (Metric(name) != value) {
      if (absl::Now() > end) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  struct OpenRaw {
    std::unique_ptr<grpc::ClientContext> ctx;  // outlives `stream`
    std::unique_ptr<RawStream> stream;
    OpenRaw() = default;
    OpenRaw(OpenRaw&&) = default;
    OpenRaw& operator=(OpenRaw&&) = default;
    ~OpenRaw() { stream.reset(); }
  };
  std::vector<OpenRaw> streams_;
  std::string dir_;
  std::unique_ptr<Subprocess> server_;
  int metrics_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

// request_id 1, OP_PUSH, worker 0, step 0, key 3, DTYPE_FLOAT32, then `data`
// announcing 2^31 bytes that never come: 18 bytes in all.
const std::string kEighteenBytes("\x08\x01\x10\x01\x18\x00\x20\x00\x28\x03\x30\x01\x3a\x80\x80\x80\x80\x08", 18);

TEST_F(HostileClientTest, EighteenBytesAnnouncingTwoGiBGetAnErrorNotACrash) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(kEighteenBytes.size(), 18u);
  RawStream* stream = OpenStream();
  const v1::PushPullResponse r = RoundTrip(stream, kEighteenBytes);
  EXPECT_EQ(r.request_id(), 1u);
  EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(r.message(), "malformed request: payload of 2147483648 bytes announced but only 0 bytes follow");
  ExpectAliveAndAnswering();
}

TEST_F(HostileClientTest, GigabyteAnnouncementsOnTwoStreamsCostNoMemory) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Configure(1).ok());
  ASSERT_TRUE(InitKeys({{3, 4}}).ok());
  absl::SleepFor(absl::Milliseconds(200));
  const int64_t before = RssBytes(server_->pid());
  ASSERT_GT(before, 0);
  // A push header for key 3, then `data` announcing 1 GiB, then 8 bytes of it.
  std::string bytes("\x08\x01\x10\x01\x18\x00\x20\x00\x28\x03\x30\x01\x3a\x80\x80\x80\x80\x04", 18);
  bytes.append(8, '\0');
  RawStream* s1 = OpenStream();
  RawStream* s2 = OpenStream();
  const v1::PushPullResponse r1 = RoundTrip(s1, bytes);
  const v1::PushPullResponse r2 = RoundTrip(s2, bytes);
  EXPECT_EQ(r1.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(r2.message(), HasSubstr("payload of 1073741824 bytes announced but only 8 bytes follow"));
  // Both streams stay open while we look.
  const int64_t after = RssBytes(server_->pid());
  EXPECT_LT(after - before, int64_t{64} << 20) << "VmRSS went from " << before << " to " << after << " bytes";
  ExpectAliveAndAnswering();
  // The streams still work.
  v1::PushPullRequest pull;
  pull.set_request_id(2);
  pull.set_op(v1::OP_PULL);
  pull.set_key(3);
  const v1::PushPullResponse r3 = RoundTrip(s1, pull.SerializeAsString());
  EXPECT_EQ(r3.code(), 0) << r3.message();
  EXPECT_EQ(r3.request_id(), 2u);
}

TEST_F(HostileClientTest, ACancelledStreamReleasesItsParkedPull) {
  ASSERT_NO_FATAL_FAILURE(Start({"--sync-timeout", "3600"}));
  ASSERT_TRUE(Configure(2).ok());
  ASSERT_TRUE(InitKeys({{3, 4}}).ok());
  const std::string errors = "dtrain_server_request_errors_total";
  ASSERT_EQ(Metric(errors), 0);
  grpc::ClientContext* ctx = nullptr;
  RawStream* stream = OpenStream(&ctx);
  v1::PushPullRequest pull;  // version 1 needs both workers' pushes: it parks
  pull.set_request_id(1);
  pull.set_op(v1::OP_PULL);
  pull.set_key(3);
  pull.set_min_version(1);
  pull.set_timeout_ms(3600 * 1000);
  ASSERT_TRUE(stream->Write(Buffer(pull.SerializeAsString())));
  ASSERT_TRUE(MetricReaches("dtrain_server_pull_requests_total", 1, absl::Seconds(5)));
  EXPECT_TRUE(MetricReaches("dtrain_server_parked_pulls", 1, absl::Seconds(5)));
  ctx->TryCancel();
  // Released now (answered CANCELLED into the dead stream), not in an hour.
  EXPECT_TRUE(MetricReaches(errors, 1, absl::Seconds(5))) << "errors: " << Metric(errors);
  EXPECT_TRUE(MetricReaches("dtrain_server_parked_pulls", 0, absl::Seconds(5)));
  ExpectAliveAndAnswering();
}

TEST_F(HostileClientTest, InitKeysOverTheCapsIsRefusedNamingTheFlag) {
  ASSERT_NO_FATAL_FAILURE(Start({"--max-keys", "2", "--max-shard-bytes", "1000000"}));
  ASSERT_TRUE(Configure(1).ok());
  grpc::Status s = InitKeys({{1, 4}, {2, 4}, {3, 4}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "key 3: this server already holds 2 keys, its cap (--max-keys 2)");
  s = InitKeys({{2, 4}});
  EXPECT_TRUE(s.ok()) << "a key already held is not counted twice: " << s.error_message();
  ASSERT_TRUE(InitKeys({{1, 4}}).ok());
  // Bytes: a fresh server, since this one's key cap is used up.
  TearDown();
  ASSERT_NO_FATAL_FAILURE(Start({"--max-shard-bytes", "1000000"}));
  ASSERT_TRUE(Configure(1).ok());
  s = InitKeys({{1, 300000}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("over its cap of 1000000 (--max-shard-bytes)"));
  ExpectAliveAndAnswering();
}

TEST_F(HostileClientTest, AHundredMillionWorkersAreRefusedAndCostNothing) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const int64_t before = RssBytes(server_->pid());
  const grpc::Status s = Configure(100000000);
  // Asserted, not expected: on a server that accepts it, the key below costs 4.6 GB.
  ASSERT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "Configure with 1e8 workers was accepted";
  EXPECT_EQ(s.error_message(), "num_workers 100000000 is over this server's cap of 10000 workers (--max-workers)");
  ASSERT_TRUE(Configure(2).ok());
  ASSERT_TRUE(InitKeys({{3, 1}}).ok());
  EXPECT_LT(RssBytes(server_->pid()) - before, int64_t{64} << 20);
  ExpectAliveAndAnswering();
}

TEST_F(HostileClientTest, BadFieldsAreInvalidArgumentNamingTheField) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Configure(1).ok());
  ASSERT_TRUE(InitKeys({{3, 2}}).ok());
  RawStream* stream = OpenStream();
  v1::PushPullRequest push;
  push.set_request_id(1);
  push.set_op(v1::OP_PUSH);
  push.set_key(3);
  push.set_step(-1);
  push.set_dtype(v1::DTYPE_FLOAT32);
  push.set_data(std::string(8, '\0'));
  v1::PushPullResponse r = RoundTrip(stream, push.SerializeAsString());
  EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)) << "a negative step was answered OK";
  EXPECT_EQ(r.message(), "push of key 3 by worker 0: step -1 is negative (steps count from 0)");

  v1::PushPullRequest pull;
  pull.set_request_id(2);
  pull.set_op(v1::OP_PULL);
  pull.set_key(3);
  pull.set_worker_rank(7);
  r = RoundTrip(stream, pull.SerializeAsString());
  EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_EQ(r.message(), "worker_rank 7 out of range [0, 1)");
  pull.set_worker_rank(0);
  pull.set_request_id(3);
  pull.set_min_version(-4);
  r = RoundTrip(stream, pull.SerializeAsString());
  EXPECT_EQ(r.message(), "pull of key 3 by worker 0: min_version -4 is negative");
  pull.set_request_id(4);
  pull.set_min_version(0);
  pull.set_timeout_ms(-1);
  r = RoundTrip(stream, pull.SerializeAsString());
  EXPECT_THAT(r.message(), HasSubstr("timeout_ms -1 is negative"));
  ExpectAliveAndAnswering();
}

TEST_F(HostileClientTest, NaNPushIsRefusedNamingKeyStepAndRank) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Configure(1).ok());
  ASSERT_TRUE(InitKeys({{3, 2}}).ok());
  RawStream* stream = OpenStream();
  const float grad[2] = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  v1::PushPullRequest push;
  push.set_request_id(1);
  push.set_op(v1::OP_PUSH_PULL);
  push.set_key(3);
  push.set_step(0);
  push.set_dtype(v1::DTYPE_FLOAT32);
  push.set_data(std::string(reinterpret_cast<const char*>(grad), sizeof(grad)));
  const v1::PushPullResponse r = RoundTrip(stream, push.SerializeAsString());
  EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)) << "a NaN push was applied";
  EXPECT_THAT(r.message(), HasSubstr("push of key 3 at step 0 by worker 0: gradient element 1 is NaN"));
  EXPECT_THAT(r.message(), HasSubstr("--allow-non-finite"));
  EXPECT_EQ(Metric("dtrain_server_updates_applied_total"), 0);
  ExpectAliveAndAnswering();
}

}  // namespace
}  // namespace dtrain::testing
