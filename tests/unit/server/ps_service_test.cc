// The ParameterServer service on loopback (loopback.h) with real PsClients.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "services/worker/kv/ps_client.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/server/ps_service.h"
#include "tests/unit/server/loopback.h"

namespace dtrain::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(PsServiceTest, TwoSyncWorkersGetIdenticalHandComputedWeights) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  auto w1 = ps.Connect(1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(0.5), kRpc).ok());
  ASSERT_TRUE(w1->Configure(KVStoreMode::kDistSync, 2, Sgd(0.5), kRpc).ok())
      << "an identical Configure must be accepted";
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2, 3, 4})}, kRpc).ok());

  const float g0[4] = {1, 2, 3, 4};
  const float g1[4] = {3, 2, 1, 0};
  float out0[4] = {}, out1[4] = {};
  const auto t0 = w0->Submit(worker::KeyRequest::PushPull(0, 5, g0, out0, 4));
  const auto t1 = w1->Submit(worker::KeyRequest::PushPull(0, 5, g1, out1, 4));
  ASSERT_TRUE(w0->Wait(t0, Soon()).ok());
  ASSERT_TRUE(w1->Wait(t1, Soon()).ok());
  // w - 0.5 * (g0 + g1) / 2 = {1,2,3,4} - {1,1,1,1}.
  EXPECT_THAT(out0, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(out1, ElementsAre(0, 1, 2, 3));

  float pulled[4] = {};
  int64_t version = -1;
  ASSERT_TRUE(w1->Wait(w1->Submit(worker::KeyRequest::Pull(5, 1, pulled, 4, &version)), Soon()).ok());
  EXPECT_EQ(version, 1);
  EXPECT_THAT(pulled, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(w0->bytes_pushed(), 16);
  EXPECT_EQ(w0->bytes_pulled(), 16);
}

TEST(PsServiceTest, PipelinedPushPullsOnManyKeys) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  constexpr int kKeys = 64, kN = 256, kSteps = 3;
  std::unique_ptr<worker::PsClient> w[2] = {ps.Connect(0), ps.Connect(1)};
  ASSERT_TRUE(w[0] && w[1]);
  ASSERT_TRUE(w[0]->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  std::vector<kv::KeyState> keys;
  for (int k = 0; k < kKeys; ++k) keys.push_back(Key(k, std::vector<float>(kN, static_cast<float>(k))));
  ASSERT_TRUE(w[0]->InitKeys(keys, kRpc).ok());

  std::vector<float> want(kKeys);  // every element of key k is equal
  for (int k = 0; k < kKeys; ++k) want[k] = static_cast<float>(k);
  // Per worker: a pushed gradient is sent from where it lies until WaitAll.
  std::vector<std::vector<float>> grad[2];
  for (auto& g : grad) g.assign(kKeys, std::vector<float>(kN));
  std::vector<std::vector<float>> out[2];
  for (auto& o : out) o.assign(kKeys, std::vector<float>(kN));
  for (int t = 0; t < kSteps; ++t) {
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < kKeys; ++k) {
        // Small integers: the average (x.0 or x.5) and the update are exact.
        std::fill(grad[r][k].begin(), grad[r][k].end(), static_cast<float>(r + k + t));
        w[r]->Submit(worker::KeyRequest::PushPull(t, k, grad[r][k].data(), out[r][k].data(), kN));
      }
    }
    for (int k = 0; k < kKeys; ++k) want[k] -= (k + t) + 0.5f;  // lr 1, average of k+t and k+t+1
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(w[r]->WaitAll(Soon()).ok()) << "step " << t;
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < kKeys; ++k) {
        ASSERT_THAT(out[r][k], ElementsAreArray(std::vector<float>(kN, want[k])))
            << "worker " << r << " key " << k << " step " << t;
      }
    }
  }
  EXPECT_EQ(ps.store_.updates_applied(), kKeys * kSteps);
  EXPECT_EQ(w[1]->bytes_pushed(), int64_t{kSteps} * kKeys * kN * 4);
  EXPECT_EQ(w[1]->bytes_pulled(), int64_t{kSteps} * kKeys * kN * 4);
}

TEST(PsServiceTest, MalformedRequestsGetInvalidArgumentAndStreamContinues) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  kv::StoreConfig config;
  config.optimizer = Sgd(1.0);
  ASSERT_TRUE(ps.store_.Configure(config).ok());
  const float init[4] = {1, 2, 3, 4};
  ASSERT_TRUE(ps.store_.InitKey(5, {4}, init, 4).ok());

  auto stub = v1::ParameterServer::NewStub(MakeChannel(ps.address()));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAfter(kRpc));
  auto stream = stub->PushPull(&ctx);
  auto roundtrip = [&](v1::PushPullRequest req) {
    v1::PushPullResponse resp;
    EXPECT_TRUE(stream->Write(req));
    EXPECT_TRUE(stream->Read(&resp));
    EXPECT_EQ(resp.request_id(), req.request_id());
    return resp;
  };
  v1::PushPullRequest bad_op;
  bad_op.set_request_id(1);
  bad_op.set_op(static_cast<v1::Op>(9));
  v1::PushPullResponse r = roundtrip(bad_op);
  EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.message(), HasSubstr("unknown op 9"));

  v1::PushPullRequest push;
  push.set_request_id(2);
  push.set_op(v1::OP_PUSH);
  push.set_key(5);
  push.set_data(std::string(16, '\0'));  // no dtype
  r = roundtrip(push);
  EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.message(), HasSubstr("dtype must be DTYPE_FLOAT32"));

  push.set_request_id(3);
  push.set_dtype(v1::DTYPE_FLOAT32);
  push.set_data(std::string(10, '\0'));
  r = roundtrip(push);
  EXPECT_EQ(r.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.message(), HasSubstr("10 bytes"));

  v1::PushPullRequest pull;
  pull.set_request_id(4);
  pull.set_op(v1::OP_PULL);
  pull.set_key(5);
  r = roundtrip(pull);
  EXPECT_EQ(r.code(), 0) << r.message();
  EXPECT_EQ(r.data().size(), 16u);
  EXPECT_EQ(ps.store_.updates_applied(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(PsServiceTest, WrongSizePushNamesSizesAndServer) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2, 3, 4})}, kRpc).ok());
  const float g[3] = {1, 1, 1};
  absl::Status s = w->Wait(w->Submit(worker::KeyRequest::Push(0, 5, g, 3)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(absl::StrCat("server 0 at ", ps.address())),
                                              HasSubstr("has 3 elements"), HasSubstr("has 4")));
  float out[4];
  EXPECT_TRUE(w->Wait(w->Submit(worker::KeyRequest::Pull(5, 0, out, 4)), Soon()).ok())
      << "the stream must survive a bad push";
}

TEST(PsServiceTest, ConfigureRejectsUnknownKvStore) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  absl::Status s = w->Configure(KVStoreMode::kLocal, 1, Sgd(1.0), kRpc);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"local\""));
  EXPECT_FALSE(ps.store_.configured());
  EXPECT_EQ(ParseKvStore("dist_device_sync").value(), kv::MergeMode::kSync);
  EXPECT_EQ(ParseKvStore("dist_async").value(), kv::MergeMode::kAsync);
}

TEST(PsServiceTest, GetStateRoundTrip) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  kv::OptimizerOptions adam;
  adam.name = "adam";
  adam.learning_rate = 0.01;
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 1, adam, kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(1, {1, 2}), Key(2, {3, 4, 5})}, kRpc).ok());
  const float g[2] = {0.5f, -0.5f};
  float out[2];
  ASSERT_TRUE(w->Wait(w->Submit(worker::KeyRequest::PushPull(0, 1, g, out, 2)), Soon()).ok());

  absl::StatusOr<std::vector<kv::KeyState>> state = w->GetState({}, kRpc);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->size(), 2u);
  const kv::KeyState& k1 = (*state)[0];
  EXPECT_EQ(k1.key, 1u);
  EXPECT_EQ(k1.version, 1);
  EXPECT_THAT(k1.values, ElementsAre(out[0], out[1]));
  EXPECT_EQ(k1.optimizer_state.size(), 4u);
  EXPECT_EQ((*state)[1].version, 0);
  EXPECT_THAT((*state)[1].values, ElementsAre(3, 4, 5));

  // Restored into a fresh server, the state reads back the same.
  Loopback other;
  ASSERT_TRUE(other.ok());
  auto w2 = other.Connect(0);
  ASSERT_TRUE(w2);
  ASSERT_TRUE(w2->Configure(KVStoreMode::kDistSync, 1, adam, kRpc).ok());
  ASSERT_TRUE(w2->InitKeys(*state, kRpc).ok());
  absl::StatusOr<std::vector<kv::KeyState>> again = w2->GetState({1}, kRpc);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].version, 1);
  EXPECT_EQ((*again)[0].values, k1.values);
  EXPECT_EQ((*again)[0].optimizer_state, k1.optimizer_state);

  EXPECT_EQ(w->GetState({99}, kRpc).status().code(), absl::StatusCode::kNotFound);
}

TEST(PsServiceTest, ClientWaitDeadlineNamesServerAndKey) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0, /*server_rank=*/3);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  float out[2];
  const absl::Time start = absl::Now();
  absl::Status s =
      w->Wait(w->Submit(worker::KeyRequest::Pull(5, /*min_version=*/7, out, 2)), start + absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("server 3 at ", ps.address(), ": no answer to pull of key 5 within")));
}

TEST(PsServiceTest, ServerSyncTimeoutNamesMissingWorker) {
  PsServiceOptions options;
  options.sync_timeout = absl::Milliseconds(300);
  options.check_interval = absl::Milliseconds(50);
  Loopback ps(options);
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  const float g[2] = {1, 1};
  float out[2];
  absl::Status s = w->Wait(w->Submit(worker::KeyRequest::PushPull(0, 5, g, out, 2)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("step 0 key 5"), HasSubstr("worker 1 (never heard from)")));
}

TEST(PsServiceTest, ClientPullTimeoutMakesServerAnswerFirst) {
  PsServiceOptions options;  // sync_timeout stays 120 s
  options.check_interval = absl::Milliseconds(50);
  Loopback ps(options);
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  w->SetPullTimeout(absl::Milliseconds(200));
  float out[2];
  const absl::Time start = absl::Now();
  absl::Status s = w->Wait(w->Submit(worker::KeyRequest::Pull(5, 1, out, 2)), start + absl::Seconds(3));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("server 0 at"), HasSubstr("waiting for worker 0 (")));
}

TEST(PsServiceTest, ConnectFailsWithinTimeoutWhenNothingListens) {
  std::string address;
  {
    Loopback gone;
    address = gone.address();
  }
  const absl::Time start = absl::Now();
  auto c = worker::PsClient::Connect(address, 2, 0, absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(absl::StrCat("server 2 at ", address)));
}

TEST(PsServiceTest, ServerGoingAwayFailsPendingTickets) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(0);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  float out[2];
  const auto parked = w->Submit(worker::KeyRequest::Pull(5, 1, out, 2));
  ps.Stop();
  absl::Status s = w->Wait(parked, Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("server 0 at ", ps.address())));
  // Later requests fail at once, naming the server too.
  s = w->Wait(w->Submit(worker::KeyRequest::Pull(5, 0, out, 2)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
}

TEST(PsServiceTest, ClientLeavingWhilePullParkedIsHarmless) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  auto w1 = ps.Connect(1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  const float g[2] = {1, 1};
  float out0[2], out1[2];
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Push(0, 5, g, 2)), Soon()).ok());
  w0->Submit(worker::KeyRequest::Pull(5, 1, out0, 2));  // parks until worker 1 pushes
  // Requests are handled in order: once a later one is answered, the pull is parked.
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Pull(5, 0, out0, 2)), Soon()).ok());
  w0.reset();  // the parked pull is answered below, into a dead stream
  ASSERT_TRUE(w1->Wait(w1->Submit(worker::KeyRequest::PushPull(0, 5, g, out1, 2)), Soon()).ok());
  EXPECT_THAT(out1, ElementsAre(0, 1));
}

TEST(PsServiceTest, AsyncPushPullAnswersWithoutOtherWorkers) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w = ps.Connect(1);
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Configure(KVStoreMode::kDistAsync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  const float g[2] = {1, 1};
  float out[2];
  ASSERT_TRUE(w->Wait(w->Submit(worker::KeyRequest::PushPull(0, 5, g, out, 2)), Soon()).ok());
  EXPECT_THAT(out, ElementsAre(0, 1));
  ASSERT_TRUE(w->Wait(w->Submit(worker::KeyRequest::PushPull(1, 5, g, out, 2)), Soon()).ok());
  EXPECT_THAT(out, ElementsAre(-1, 0));
}

}  // namespace
}  // namespace dtrain::server
