// CpuAggregator: the sum over replicas lands in replica 0 in replica order, the
// broadcast copies it back, and mismatched buffers are refused.
#include "services/worker/kv/local_aggregator.h"

#include <vector>

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

TEST(CpuAggregatorTest, ReduceSumsEveryReplicaIntoTheFirstInReplicaOrder) {
  // 1e8 + 1 - 1e8 is 0 in float when summed in this order, 1 in another: the order shows.
  std::vector<float> r0 = {1e8f, 2.0f, 3.0f}, r1 = {1.0f, 20.0f, 30.0f}, r2 = {-1e8f, 200.0f, 300.0f};
  std::vector<float> b0 = {1.0f}, b1 = {2.0f}, b2 = {4.0f};
  CpuAggregator agg(3);
  ASSERT_TRUE(agg.Reduce({{{r0.data(), r1.data(), r2.data()}, 3}, {{b0.data(), b1.data(), b2.data()}, 1}}).ok());
  EXPECT_EQ(r0, (std::vector<float>{(1e8f + 1.0f) - 1e8f, 222.0f, 333.0f}));
  EXPECT_EQ(b0, (std::vector<float>{7.0f}));
  EXPECT_EQ(r1, (std::vector<float>{1.0f, 20.0f, 30.0f})) << "only replica 0 is written";
  EXPECT_TRUE(agg.Wait(absl::Now()).ok());
}

TEST(CpuAggregatorTest, BroadcastCopiesTheFirstReplicaToTheOthers) {
  std::vector<float> r0 = {5.0f, 6.0f}, r1 = {0.0f, 0.0f}, r2 = {9.0f, 9.0f};
  CpuAggregator agg(3);
  ASSERT_TRUE(agg.Broadcast({{{r0.data(), r1.data(), r2.data()}, 2}}).ok());
  EXPECT_EQ(r1, r0);
  EXPECT_EQ(r2, r0);
}

TEST(CpuAggregatorTest, OneReplicaLeavesTheBuffersAsTheyAre) {
  std::vector<float> r0 = {1.5f, -2.5f};
  CpuAggregator agg(1);
  ASSERT_TRUE(agg.Reduce({{{r0.data()}, 2}}).ok());
  ASSERT_TRUE(agg.Broadcast({{{r0.data()}, 2}}).ok());
  EXPECT_EQ(r0, (std::vector<float>{1.5f, -2.5f}));
}

TEST(CpuAggregatorTest, AParameterWithoutOneBufferPerReplicaIsRefused) {
  std::vector<float> r0 = {1.0f}, r1 = {2.0f};
  CpuAggregator agg(3);
  absl::Status s = agg.Reduce({{{r0.data(), r1.data()}, 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("2 replica buffers"), std::string::npos) << s;
  EXPECT_EQ(r0[0], 1.0f) << "nothing is written when the call is refused";
  EXPECT_EQ(agg.Broadcast({{{r0.data(), r1.data()}, 1}}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dtrain::worker
