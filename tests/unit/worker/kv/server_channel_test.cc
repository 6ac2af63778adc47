// The ServerChannel contract (server_channel.h) as the in-process channel keeps it,
// and the requests no channel sends.
#include "services/worker/kv/server_channel.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/worker/kv/support/in_process_server.h"

namespace dtrain::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(KeyRequestTest, AnOpAndAnAnswerThatDoNotGoTogetherAreRefused) {
  float out[2];
  EXPECT_TRUE(ValidateKeyRequest(KeyRequest::Pull(1, 0, out, 2)).ok());
  KeyRequest push = KeyRequest::Push(0, 1, out, 2);
  push.target = KeyRequest::Target::kWeights;
  EXPECT_THAT(ValidateKeyRequest(push).message(), HasSubstr("push of key 1 cannot be answered with weights"));
  KeyRequest delta_pull = KeyRequest::Pull(1, 0, out, 2);
  delta_pull.target = KeyRequest::Target::kDelta;
  EXPECT_EQ(ValidateKeyRequest(delta_pull).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ValidateKeyRequest(KeyRequest::Pull(1, 0, nullptr, 2)).message(), HasSubstr("without a buffer"));
  KeyRequest short_out = KeyRequest::PushPull(0, 1, out, out, 2);
  short_out.numel = 1;
  EXPECT_THAT(ValidateKeyRequest(short_out).message(), HasSubstr("pushes 2 elements but has room for 1"));
  EXPECT_TRUE(ValidateKeyRequest(KeyRequest::PushPullVersionOnly(0, 1, out, 2)).ok());
}

class InProcessChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int r = 0; r < 2; ++r) {
      auto c = server_.Connect(r, absl::Seconds(1));
      ASSERT_TRUE(c.ok()) << c.status();
      w_.push_back(*std::move(c));
    }
    kv::OptimizerOptions sgd;
    sgd.learning_rate = 1.0;
    ASSERT_TRUE(w_[0]->Configure(KVStoreMode::kDistSync, 2, sgd, absl::Seconds(1)).ok());
    kv::KeyState k;
    k.key = 5;
    k.shape = {2};
    k.values = {1, 2};
    ASSERT_TRUE(w_[0]->InitKeys({k}, absl::Seconds(1)).ok());
  }
  absl::Time Soon() const { return absl::Now() + absl::Seconds(5); }

  testing::InProcessServer server_{0};
  std::vector<std::unique_ptr<ServerChannel>> w_;
};

TEST_F(InProcessChannelTest, ASyncPullIsAnsweredOnceEveryWorkersPushIsIn) {
  const float g0[2] = {1, 1}, g1[2] = {3, 5};
  float out0[2] = {0, 0}, out1[2] = {0, 0};
  int64_t version = -1;
  const auto t0 = w_[0]->Submit(KeyRequest::PushPull(0, 5, g0, out0, 2));
  EXPECT_FALSE(w_[0]->WaitUntil(t0, absl::Now())) << "worker 1 has not pushed";
  KeyRequest r1 = KeyRequest::PushPull(0, 5, g1, out1, 2);
  r1.version_out = &version;
  ASSERT_TRUE(w_[1]->Wait(w_[1]->Submit(r1), Soon()).ok());
  ASSERT_TRUE(w_[0]->Wait(t0, Soon()).ok());
  EXPECT_THAT(out0, ElementsAre(-1, -1));  // w - lr * mean(g)
  EXPECT_THAT(out1, ElementsAre(-1, -1));
  EXPECT_EQ(version, 1);
  EXPECT_EQ(w_[0]->bytes_pushed(), 8);
  EXPECT_EQ(w_[0]->bytes_pulled(), 8);
  EXPECT_EQ(w_[0]->Wait(t0, Soon()).code(), absl::StatusCode::kInvalidArgument) << "a ticket is waited for once";
}

TEST_F(InProcessChannelTest, AKilledServerFailsWhatIsOutAndWhatComesLaterUnavailable) {
  const float g[2] = {1, 1};
  float out[2];
  const auto parked = w_[0]->Submit(KeyRequest::PushPull(0, 5, g, out, 2));
  server_.Kill();
  const absl::Status s = w_[0]->Wait(parked, Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("server 0 at inprocess:0"));
  EXPECT_EQ(w_[1]->Wait(w_[1]->Submit(KeyRequest::Pull(5, 0, out, 2)), Soon()).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server_.Connect(0, absl::Seconds(1)).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(InProcessChannelTest, ARequestThatMakesNoSenseFailsItsTicket) {
  float out[2];
  KeyRequest bad = KeyRequest::Pull(5, 0, out, 2);
  bad.target = KeyRequest::Target::kNone;
  const absl::Status s = w_[0]->Wait(w_[0]->Submit(bad), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(w_[0]->Wait(w_[0]->Submit(KeyRequest::Pull(5, 0, out, 2)), Soon()).ok()) << "the channel goes on";
  EXPECT_THAT(out, ElementsAre(1, 2));
}

}  // namespace
}  // namespace dtrain::worker
