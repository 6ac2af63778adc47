// How the worker reads an elastic job's servers' answers during a membership change
// (membership_status.h) and the status a refused step returns (kvstore.h).
#include "services/worker/kv/membership_status.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "services/worker/kv/kvstore.h"

namespace dtrain::worker {
namespace {

TEST(MembershipStatusTest, OnlyTheGatesHoldingTextsAreAPendingChange) {
  EXPECT_TRUE(IsMembershipPending(absl::UnavailableError(
      "server 1 at h:1: push-pull of key 3: membership change to generation 2 pending for 3s: step 181 waits for "
      "its commit (steps up to 180 go on); retry")));
  EXPECT_TRUE(IsMembershipPending(absl::UnavailableError(
      "membership generation 2 is not committed on this server yet (it runs generation 1 ...); retry")));
  EXPECT_TRUE(IsMembershipPending(absl::UnavailableError(
      "server 0 at h:1: push of key 3: this server has not had its elastic job's membership from the scheduler yet; "
      "retry")));
  // A broken stream is a dead server, not a change to wait for.
  EXPECT_FALSE(IsMembershipPending(absl::UnavailableError("server 1 at h:1: stream broke: Socket closed")));
  EXPECT_FALSE(IsMembershipPending(absl::AbortedError("membership change to generation 2 pending")));
}

TEST(MembershipStatusTest, OnlyAnAbortedMembershipChangedIsARedo) {
  EXPECT_TRUE(IsMembershipChangeAnswer(absl::AbortedError(
      "server 0 at h:1: push-pull of key 3: membership changed from step 180: generation 2, workers {0,1,3}")));
  EXPECT_TRUE(
      IsMembershipChangeAnswer(absl::AbortedError("membership changed from step 4: generation 1, workers {0}")));
  EXPECT_FALSE(IsMembershipChangeAnswer(absl::AbortedError("rolled back to step 800: server 1 lost its shard")));
  EXPECT_FALSE(IsMembershipChangeAnswer(absl::UnavailableError("membership changed from step 4")));
}

TEST(MembershipStatusTest, TheRedoStatusCarriesItsStepAndIsNoRollback) {
  const absl::Status s = MembershipChangedStatus(180, "membership changed from step 180: generation 2, workers {0,1}");
  EXPECT_TRUE(IsMembershipChanged(s));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(MembershipChangedStep(s), 180);
  EXPECT_FALSE(IsRollback(s));
  EXPECT_FALSE(IsMembershipChanged(RollbackStatus("rolled back to step 800")));
  // The text alone does not make one: only the marked status says which step to redo.
  EXPECT_FALSE(IsMembershipChanged(absl::AbortedError("membership changed from step 180")));
  EXPECT_EQ(MembershipChangedStep(absl::AbortedError("membership changed from step 180")), -1);
}

TEST(MembershipStatusTest, HeldPushPausesAreBetweenTwentyAndFiftyMillisecondsAndSpread) {
  absl::Duration lowest = absl::InfiniteDuration(), highest = absl::ZeroDuration();
  for (uint64_t attempt = 0; attempt < 200; ++attempt) {
    const absl::Duration d = HeldPushPause(attempt, /*salt=*/attempt * 31 + 7);
    EXPECT_GE(d, kHeldPushPauseMin);
    EXPECT_LE(d, kHeldPushPauseMax);
    lowest = std::min(lowest, d);
    highest = std::max(highest, d);
  }
  EXPECT_LT(lowest, absl::Milliseconds(25));
  EXPECT_GT(highest, absl::Milliseconds(45));
}

}  // namespace
}  // namespace dtrain::worker
