// KeyRequestProto: the PushPullRequest header every channel sends for a KeyRequest.
#include "services/worker/kv/key_request_proto.h"

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

RequestSender Sender() {
  RequestSender s;
  s.worker_rank = 3;
  s.pull_timeout_ms = 1500;
  return s;
}

TEST(KeyRequestProtoTest, APullAsksForItsVersionWithThePullTimeout) {
  float out[2];
  const v1::PushPullRequest pull = KeyRequestProto(KeyRequest::Pull(7, 4, out, 2), Sender());
  EXPECT_EQ(pull.op(), v1::OP_PULL);
  EXPECT_EQ(pull.worker_rank(), 3);
  EXPECT_EQ(pull.key(), 7u);
  EXPECT_EQ(pull.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(pull.min_version(), 4);
  EXPECT_EQ(pull.step(), 0);
  EXPECT_EQ(pull.timeout_ms(), 1500);
  EXPECT_FALSE(pull.exact_version() || pull.version_only() || pull.pull_delta());
  EXPECT_TRUE(KeyRequestProto(KeyRequest::PullExact(7, 4, out, 2), Sender()).exact_version());
  EXPECT_TRUE(KeyRequestProto(KeyRequest::PullVersionOnly(7, 4), Sender()).version_only());
}

TEST(KeyRequestProtoTest, APushCarriesItsStepAndHowItsDataIsPacked) {
  const float grad[3] = {1, 2, 3};
  const v1::PushPullRequest push = KeyRequestProto(KeyRequest::Push(9, 7, grad, 3), Sender());
  EXPECT_EQ(push.op(), v1::OP_PUSH);
  EXPECT_EQ(push.step(), 9);
  EXPECT_EQ(push.min_version(), 0);
  EXPECT_EQ(push.timeout_ms(), 0) << "nothing to wait for";
  EXPECT_EQ(push.compression(), v1::COMPRESSION_NONE);

  PushData packed{"abcd", 4, 3, {kv::CompressionType::kTwoBit, 0.5f}};
  const v1::PushPullRequest two_bit = KeyRequestProto(KeyRequest::Push(9, 7, packed), Sender());
  EXPECT_EQ(two_bit.compression(), v1::COMPRESSION_2BIT);
  EXPECT_EQ(two_bit.gc_threshold(), 0.5f);
  packed.compression = {kv::CompressionType::kFp16, 0.5f};
  const v1::PushPullRequest fp16 = KeyRequestProto(KeyRequest::Push(9, 7, packed), Sender());
  EXPECT_EQ(fp16.compression(), v1::COMPRESSION_FP16);
  EXPECT_EQ(fp16.gc_threshold(), 0.0f) << "only 2bit has a threshold";
}

TEST(KeyRequestProtoTest, APushPullAsksForAPackedChangeOnlyWhereTheChannelCanUnpackIt) {
  const float grad[2] = {1, 2};
  float out[2];
  const KeyRequest delta = KeyRequest::PushPull(5, 7, PushData::Floats(grad, 2), out, /*pull_delta=*/true);
  const v1::PushPullRequest plain = KeyRequestProto(delta, Sender());
  EXPECT_EQ(plain.op(), v1::OP_PUSH_PULL);
  EXPECT_EQ(plain.step(), 5);
  EXPECT_EQ(plain.timeout_ms(), 1500);
  EXPECT_FALSE(plain.pull_delta()) << "no pull compression set";
  RequestSender unpacks = Sender();
  unpacks.pull_delta = true;
  EXPECT_TRUE(KeyRequestProto(delta, unpacks).pull_delta());
  EXPECT_FALSE(KeyRequestProto(KeyRequest::PushPull(5, 7, grad, out, 2), unpacks).pull_delta())
      << "the weights were asked for";
  EXPECT_TRUE(KeyRequestProto(KeyRequest::PushPullVersionOnly(5, 7, grad, 2), unpacks).version_only());
}

TEST(KeyRequestProtoTest, TheIdentityIsSentOnlyOnceSet) {
  float out[1];
  const v1::PushPullRequest anonymous = KeyRequestProto(KeyRequest::Pull(7, 0, out, 1), Sender());
  EXPECT_EQ(anonymous.job_id(), "");
  EXPECT_EQ(anonymous.incarnation(), 0u);
  RequestSender known = Sender();
  known.job_id = "job-a";
  known.incarnation = 2;
  const v1::PushPullRequest named = KeyRequestProto(KeyRequest::Pull(7, 0, out, 1), known);
  EXPECT_EQ(named.job_id(), "job-a");
  EXPECT_EQ(named.incarnation(), 2u);
  EXPECT_EQ(named.request_id(), 0u) << "the channel numbers its requests";
}

TEST(KeyRequestProtoTest, APushCarriesItsMembershipGenerationAndAPullNone) {
  const float grad[2] = {1, 2};
  float out[2];
  KeyRequest push = KeyRequest::PushPull(5, 7, grad, out, 2);
  EXPECT_EQ(KeyRequestProto(push, Sender()).membership_generation(), 0) << "a fixed job's pushes: generation 0";
  push.membership_generation = 3;
  EXPECT_EQ(KeyRequestProto(push, Sender()).membership_generation(), 3);
  KeyRequest pull = KeyRequest::Pull(7, 5, out, 2);
  pull.membership_generation = 3;
  EXPECT_EQ(KeyRequestProto(pull, Sender()).membership_generation(), 0) << "the gate admits pushes only";
}

TEST(KeyRequestProtoTest, APushCarriesItsLag) {
  const float grad[2] = {1, 2};
  float out[2];
  KeyRequest push = KeyRequest::PushPull(5, 7, grad, out, 2);
  EXPECT_EQ(KeyRequestProto(push, Sender()).lag(), 0) << "fresh, as every push outside dist_ssp";
  push.lag = 3;
  EXPECT_EQ(KeyRequestProto(push, Sender()).lag(), 3);
}

}  // namespace
}  // namespace dtrain::worker
