// The worker's rules for waiting on a dead peer that may rejoin (--rejoin-timeout).
#include "services/worker/peer_tracker.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace dtrain::worker {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

TEST(PeerTrackerTest, NoDeadPeerMeansTheWaitsOwnErrorApplies) {
  PeerTracker peers(absl::Seconds(30));
  auto extend = peers.ExtendWait(kT0);
  ASSERT_TRUE(extend.ok()) << extend.status();
  EXPECT_FALSE(*extend);
  EXPECT_TRUE(peers.DeadPeers().empty());
}

TEST(PeerTrackerTest, KeepsWaitingWithinTheRejoinTimeoutThenFailsNamingTheDeadWorker) {
  PeerTracker peers(absl::Seconds(30));
  peers.OnDead(1, kT0, "heartbeat stream broke");
  auto extend = peers.ExtendWait(kT0 + absl::Seconds(12));
  ASSERT_TRUE(extend.ok()) << extend.status();
  EXPECT_TRUE(*extend);
  ASSERT_EQ(peers.DeadPeers().size(), 1u);
  EXPECT_EQ(peers.DeadPeers()[0].rank, 1);
  EXPECT_EQ(peers.DeadPeers()[0].since, kT0);

  auto late = peers.ExtendWait(kT0 + absl::Seconds(30));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(late.status().message(),
            "worker 1 died (heartbeat stream broke) and did not rejoin within 30s (--rejoin-timeout)");
}

TEST(PeerTrackerTest, ARejoinedWorkerIsNoLongerWaitedFor) {
  PeerTracker peers(absl::Seconds(30));
  peers.OnDead(1, kT0, "silent for 3 s");
  peers.OnDead(2, kT0 + absl::Seconds(5), "");
  peers.OnRejoined(1);
  ASSERT_EQ(peers.DeadPeers().size(), 1u);
  EXPECT_EQ(peers.DeadPeers()[0].rank, 2);
  // Worker 2's own clock counts, not worker 1's (which would be past the timeout).
  auto extend = peers.ExtendWait(kT0 + absl::Seconds(31));
  ASSERT_TRUE(extend.ok()) << extend.status();
  EXPECT_TRUE(*extend);
  peers.OnRejoined(2);
  extend = peers.ExtendWait(kT0 + absl::Seconds(100));
  ASSERT_TRUE(extend.ok());
  EXPECT_FALSE(*extend);
}

TEST(PeerTrackerTest, ARepeatedReportKeepsTheFirstDeathTime) {
  PeerTracker peers(absl::Seconds(10));
  peers.OnDead(1, kT0, "heartbeat stream broke");
  peers.OnDead(1, kT0 + absl::Seconds(8), "again");
  auto extend = peers.ExtendWait(kT0 + absl::Seconds(10));
  EXPECT_EQ(extend.status().code(), absl::StatusCode::kAborted) << "the wait was extended from the second report";
  EXPECT_TRUE(absl::StrContains(extend.status().message(), "heartbeat stream broke"));
}

TEST(PeerTrackerTest, RejoinTimeoutZeroFailsAtOnce) {
  PeerTracker peers(absl::ZeroDuration());
  peers.OnDead(3, kT0, "heartbeat stream broke");
  auto extend = peers.ExtendWait(kT0);
  EXPECT_EQ(extend.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(extend.status().message(), "worker 3 died (heartbeat stream broke) and --rejoin-timeout is 0");
}

}  // namespace
}  // namespace dtrain::worker
