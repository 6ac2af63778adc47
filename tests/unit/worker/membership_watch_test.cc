// The worker's copy of an elastic job's membership (membership_watch.h): what it takes
// from the scheduler, and its waits' deadlines.
#include "services/worker/membership_watch.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/worker/fake_cluster_elastic.h"

namespace dtrain::worker {
namespace {

using ::testing::HasSubstr;
using testing::MakeMembership;

const elastic::Membership kStart = MakeMembership(2, 4, {{0, {0, 1}}});
const elastic::Membership kJoined = MakeMembership(2, 4, {{0, {0, 1}}, {180, {0, 1, 2}}});

TEST(MembershipWatchTest, TakesANewerMembershipAndIgnoresAnOlderOrABadOne) {
  MembershipWatch watch(kStart);
  EXPECT_TRUE(watch.Update(elastic::MembershipToProto(kJoined)));
  EXPECT_EQ(watch.current().schedule, kJoined.schedule);
  EXPECT_FALSE(watch.Update(elastic::MembershipToProto(kStart))) << "an older answer";
  v1::MembershipState bad = elastic::MembershipToProto(kJoined);
  bad.mutable_generations(1)->set_from_step(0);  // not after the generation before
  EXPECT_FALSE(watch.Update(bad));
  EXPECT_EQ(watch.current().schedule, kJoined.schedule);
}

TEST(MembershipWatchTest, AWaitForMoreGenerationsEndsWhenTheHeartbeatBringsOne) {
  MembershipWatch watch(kStart);
  std::thread heartbeat([&] { watch.Update(elastic::MembershipToProto(kJoined)); });
  absl::StatusOr<elastic::Membership> m = watch.AwaitGenerations(1, absl::Now() + absl::Seconds(30));
  heartbeat.join();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->schedule.generations().size(), 2u);
}

TEST(MembershipWatchTest, AWaitPastItsDeadlineNamesWhatItAwaitedAndWhatIsHeld) {
  MembershipWatch watch(kStart);
  absl::StatusOr<elastic::Membership> m = watch.AwaitGenerations(1, absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(m.status().message(), HasSubstr("membership generation 1"));
  EXPECT_THAT(m.status().message(), HasSubstr("workers {0,1}"));
  m = watch.AwaitRank(2, absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(m.status().message(), HasSubstr("holding worker 2"));
}

TEST(MembershipWatchTest, AWaitForARankEndsOnceAGenerationHoldsIt) {
  MembershipWatch watch(kStart);
  EXPECT_EQ(FirstGenerationHolding(kStart.schedule, 2), -1);
  EXPECT_EQ(FirstGenerationHolding(kJoined.schedule, 2), 1);
  EXPECT_EQ(FirstGenerationHolding(kJoined.schedule, 1), 0);
  watch.Update(elastic::MembershipToProto(kJoined));
  absl::StatusOr<elastic::Membership> m = watch.AwaitRank(2, absl::Now());
  ASSERT_TRUE(m.ok()) << m.status();
}

TEST(MembershipWatchTest, TheJobsEndStopsAWait) {
  MembershipWatch watch(kStart, [] { return absl::AbortedError("the scheduler ended the job: done"); });
  absl::StatusOr<elastic::Membership> m = watch.AwaitGenerations(1, absl::InfiniteFuture());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace dtrain::worker
