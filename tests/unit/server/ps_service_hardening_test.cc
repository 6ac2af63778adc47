// What a client can no longer do to a parameter server: poison keys with NaN, have a
// negative step ignored, leave parked pulls behind, or make a stream hold without
// bound. Real service on loopback (loopback.h), real PsClients.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/kv/tensor_codec.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/server/loopback.h"

namespace dtrain::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Polls `pred` every 10 ms until it holds or `timeout` passes.
template <typename Pred>
bool Eventually(Pred pred, absl::Duration timeout = absl::Seconds(5)) {
  const absl::Time end = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

std::vector<float> Weights(kv::ShardStore& store, uint64_t key) {
  std::vector<kv::KeyState> snap;
  EXPECT_TRUE(store.Snapshot({key}, &snap).ok());
  return snap.empty() ? std::vector<float>{} : snap[0].values;
}

TEST(PsServiceHardeningTest, NonFinitePushIsRefusedNamingKeyStepAndRankAndPoisonsNothing) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  auto w1 = ps.Connect(1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2, 3})}, kRpc).ok());
  const float nan_grad[3] = {0, std::numeric_limits<float>::quiet_NaN(), 0};
  absl::Status s = w1->Wait(w1->Submit(worker::KeyRequest::Push(0, 5, nan_grad, 3)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr(absl::StrCat("server 0 at ", ps.address())),
                    HasSubstr("push of key 5 at step 0 by worker 1: gradient element 1 is NaN"),
                    HasSubstr("--allow-non-finite")));
  const float inf_grad[3] = {0, 0, -std::numeric_limits<float>::infinity()};
  float out[3];
  s = w1->Wait(w1->Submit(worker::KeyRequest::PushPull(0, 5, inf_grad, out, 3)), Soon());
  EXPECT_THAT(std::string(s.message()), HasSubstr("gradient element 2 is -Inf"));
  EXPECT_THAT(Weights(ps.store_, 5), ElementsAre(1, 2, 3));
  // The key is untouched: finite pushes from both workers still merge.
  const float g[3] = {2, 2, 2};
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Push(0, 5, g, 3)), Soon()).ok());
  ASSERT_TRUE(w1->Wait(w1->Submit(worker::KeyRequest::PushPull(0, 5, g, out, 3)), Soon()).ok());
  EXPECT_THAT(out, ElementsAre(-1, 0, 1));
}

TEST(PsServiceHardeningTest, AllowNonFiniteAppliesSuchPushes) {
  PsServiceOptions options;
  options.allow_non_finite = true;
  Loopback ps(options);
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  const float g[2] = {std::numeric_limits<float>::infinity(), 0};
  float out[2];
  ASSERT_TRUE(w->Wait(w->Submit(worker::KeyRequest::PushPull(0, 5, g, out, 2)), Soon()).ok());
  EXPECT_TRUE(std::isinf(out[0]));
  EXPECT_EQ(out[1], 2);
}

TEST(PsServiceHardeningTest, NegativeStepIsInvalidArgumentNotIgnored) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  const float g[2] = {1, 1};
  const absl::Status s = w->Wait(w->Submit(worker::KeyRequest::Push(-1, 5, g, 2)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("push of key 5 by worker 0: step -1 is negative"));
  EXPECT_EQ(ps.store_.updates_applied(), 0);
}

TEST(PsServiceHardeningTest, ConfigureAndInitKeysOverTheCapsNameTheFlags) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  kv::StoreLimits limits;
  limits.max_keys = 1;
  ps.store_.SetLimits(limits);
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  absl::Status s = w->Configure(KVStoreMode::kDistSync, 100000000, Sgd(1.0), kRpc);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("num_workers 100000000 is over this server's cap of 10000 "
                                                  "workers (--max-workers)"));
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  s = w->InitKeys({Key(5, {1}), Key(6, {1})}, kRpc);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("InitKeys"), HasSubstr("key 6: this server already holds 1 keys, its cap "
                                                     "(--max-keys 1)")));
}

TEST(PsServiceHardeningTest, AStreamThatGoesAwayTakesItsParkedPullsWithIt) {
  PsServiceOptions options;
  options.sync_timeout = absl::Hours(1);  // only the stream's end can release them
  Loopback ps(options);
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  ASSERT_TRUE(w0);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2}), Key(6, {3})}, kRpc).ok());
  float out[2];
  w0->Submit(worker::KeyRequest::Pull(5, 1, out, 2));
  w0->Submit(worker::KeyRequest::Pull(6, 1, out, 1));
  ASSERT_TRUE(Eventually([&] { return ps.store_.parked_pulls() == 2; }));
  w0.reset();  // cancels the stream
  EXPECT_TRUE(Eventually([&] { return ps.store_.parked_pulls() == 0; }))
      << ps.store_.parked_pulls() << " pulls still parked for a stream that is gone";
}

TEST(PsServiceHardeningTest, AFullStreamStopsReadingUntilAnswersGoOut) {
  PsServiceOptions options;
  options.max_pending_requests = 3;
  Loopback ps(options);
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  auto w1 = ps.Connect(1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  const float g[2] = {1, 1};
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Push(0, 5, g, 2)), Soon()).ok());
  constexpr int kPulls = 10;
  std::vector<std::vector<float>> outs(kPulls, std::vector<float>(2));
  std::vector<worker::PsClient::Ticket> tickets;
  for (int i = 0; i < kPulls; ++i) tickets.push_back(w0->Submit(worker::KeyRequest::Pull(5, 1, outs[i].data(), 2)));
  ASSERT_TRUE(Eventually([&] { return ps.store_.parked_pulls() == 3; }));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(ps.store_.parked_pulls(), 3) << "the stream must stop reading at its cap";
  // Worker 1's push completes the step: the parked pulls are answered, reading
  // resumes, and the rest are answered at once.
  ASSERT_TRUE(w1->Wait(w1->Submit(worker::KeyRequest::Push(0, 5, g, 2)), Soon()).ok());
  for (int i = 0; i < kPulls; ++i) {
    ASSERT_TRUE(w0->Wait(tickets[i], Soon()).ok()) << i;
    EXPECT_THAT(outs[i], ElementsAre(0, 1));
  }
  EXPECT_EQ(ps.store_.parked_pulls(), 0);
}

TEST(PsServiceHardeningTest, APushWhoseOpFollowsItsDataIsRefusedNotReadOutOfBounds) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  kv::StoreConfig config;
  config.optimizer = Sgd(1.0);
  ASSERT_TRUE(ps.store_.Configure(config).ok());
  const float init[2] = {1, 2};
  ASSERT_TRUE(ps.store_.InitKey(5, {2}, init, 2).ok());
  auto channel = MakeChannel(ps.address());
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(kRpc));
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(),
          grpc::internal::RpcMethod("/dtrain.v1.ParameterServer/PushPull", grpc::internal::RpcMethod::BIDI_STREAMING),
          &ctx));
  // request_id 1, key 5, dtype FLOAT32, data (8 bytes), and only then op = OP_PUSH.
  std::string bytes("\x08\x01\x28\x05\x30\x01\x3a\x08", 8);
  bytes.append(8, '\0');
  bytes.append("\x10\x01", 2);
  grpc::Slice slice(bytes);
  ASSERT_TRUE(stream->Write(grpc::ByteBuffer(&slice, 1)));
  grpc::ByteBuffer answer;
  ASSERT_TRUE(stream->Read(&answer));
  v1::PushPullResponse resp;
  ASSERT_TRUE(kv::DecodeWithPayload(&answer, &resp, v1::PushPullResponse::kDataFieldNumber, nullptr).ok());
  EXPECT_EQ(resp.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(resp.message(), "push of key 5 by worker 0: op must come before data on the wire (put data last)");
  EXPECT_EQ(ps.store_.updates_applied(), 0);
  ctx.TryCancel();
}

}  // namespace
}  // namespace dtrain::server
