#include "services/scheduler/liveness.h"

#include <gtest/gtest.h>

namespace dtrain::scheduler {
namespace {

class LivenessTest : public ::testing::Test {
 protected:
  Liveness Make(absl::Duration rejoin = absl::ZeroDuration()) {
    LivenessOptions o;
    o.heartbeat_timeout = absl::Seconds(10);
    o.rejoin_timeout = rejoin;
    o.clock = [this] { return now_; };
    return Liveness(o);
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(LivenessTest, ANodeIsOverdueOnlyPastTheHeartbeatTimeout) {
  Liveness l = Make();
  LivenessRecord node;
  l.Heard(&node);
  EXPECT_EQ(node.last_heard, now_);
  now_ += absl::Seconds(10);
  EXPECT_FALSE(l.Overdue(node).has_value());
  now_ += absl::Milliseconds(1);
  ASSERT_TRUE(l.Overdue(node).has_value());
  EXPECT_EQ(*l.Overdue(node), absl::Seconds(10) + absl::Milliseconds(1));
  l.Heard(&node);
  EXPECT_FALSE(l.Overdue(node).has_value());
}

TEST_F(LivenessTest, SilenceCountsFromNoEarlierThanAskedFor) {
  Liveness l = Make();
  LivenessRecord node;
  l.Heard(&node);
  now_ += absl::Seconds(30);
  const absl::Time started = now_ - absl::Seconds(5);
  EXPECT_FALSE(l.Overdue(node, started).has_value());
  now_ += absl::Seconds(6);
  EXPECT_EQ(*l.Overdue(node, started), absl::Seconds(11));
}

TEST_F(LivenessTest, DeathsKeepTheirTimeAndReason) {
  Liveness l = Make();
  LivenessRecord node;
  l.Heard(&node);
  now_ += absl::Seconds(3);
  l.Died(&node, "heartbeat stream broke");
  EXPECT_TRUE(node.dead);
  EXPECT_EQ(node.dead_at, now_);
  EXPECT_EQ(node.death_reason, "heartbeat stream broke");
  now_ += absl::Seconds(2);
  EXPECT_EQ(l.SinceDeath(node), absl::Seconds(2));
  EXPECT_EQ(l.SinceHeard(node), absl::Seconds(5));
  EXPECT_EQ(SecondsText(l.SinceHeard(node)), "5.0 s");
  l.Revived(&node);
  EXPECT_FALSE(node.dead);
}

TEST_F(LivenessTest, WithoutARejoinTimeoutADeathIsFinal) {
  Liveness l = Make();
  LivenessRecord node;
  l.Died(&node, "no heartbeat for 10.1 s");
  EXPECT_FALSE(l.RejoinAllowed());
  EXPECT_FALSE(l.MayRejoin(node));
}

TEST_F(LivenessTest, ADeadNodeMayRejoinWithinTheRejoinTimeout) {
  Liveness l = Make(absl::Seconds(30));
  LivenessRecord node;
  l.Heard(&node);
  EXPECT_TRUE(l.RejoinAllowed());
  EXPECT_FALSE(l.MayRejoin(node));  // alive: nothing to come back from
  l.Died(&node, "heartbeat stream broke");
  now_ += absl::Seconds(30);
  EXPECT_TRUE(l.MayRejoin(node));
  now_ += absl::Milliseconds(1);
  EXPECT_FALSE(l.MayRejoin(node));
  l.Left(&node);
  EXPECT_FALSE(node.dead);
}

}  // namespace
}  // namespace dtrain::scheduler
