// ParkedPulls: one key's waiting pulls, answered, dropped, failed and timed out in
// parking order, with the texts a worker gets. No store, no sockets: times are given.
#include "common/kv/parked_pulls.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

// What one pull's callback was told.
struct Answer {
  int id;
  absl::Status status;
  int64_t version;
};

class ParkedPullsTest : public ::testing::Test {
 protected:
  // Parks pull `id` of worker `rank` for `min_version`, expiring `wait` after kStart.
  void Park(int id, int rank, int64_t min_version, absl::Duration wait = absl::Seconds(30), uint64_t owner = 0) {
    ParkedPull p{rank,
                 min_version,
                 kStart,
                 kStart + wait,
                 [this, id](const absl::Status& s, const PullAnswer& a) {
                   answers_.push_back({id, s, a.version});
                 },
                 owner};
    pulls_.Park(std::move(p));
  }

  std::vector<int> Ids() const {
    std::vector<int> ids;
    for (const Answer& a : answers_) ids.push_back(a.id);
    return ids;
  }

  ParkedPulls pulls_;
  std::vector<Answer> answers_;
};

TEST_F(ParkedPullsTest, TakeReadyAnswersTheSatisfiedPullsInParkingOrder) {
  Park(1, 0, 5);
  Park(2, 1, 3);
  Park(3, 0, 4);
  Park(4, 1, 7);
  std::vector<int> taken;
  EXPECT_EQ(pulls_.TakeReady(4, [&](const ParkedPull& p) { taken.push_back(static_cast<int>(p.min_version)); }), 2);
  EXPECT_THAT(taken, ElementsAre(3, 4));
  EXPECT_EQ(pulls_.size(), 2);
  EXPECT_EQ(pulls_.TakeReady(4, [&](const ParkedPull&) { ADD_FAILURE() << "nothing else is ready"; }), 0);
  taken.clear();
  EXPECT_EQ(pulls_.TakeReady(9, [&](const ParkedPull& p) { taken.push_back(static_cast<int>(p.min_version)); }), 2);
  EXPECT_THAT(taken, ElementsAre(5, 7));
  EXPECT_TRUE(pulls_.empty());
}

TEST_F(ParkedPullsTest, DropFailsOnlyTheMatchingPullsWithTheKeysVersion) {
  Park(1, 0, 5, absl::Seconds(30), /*owner=*/11);
  Park(2, 1, 5, absl::Seconds(30), /*owner=*/12);
  Park(3, 0, 6, absl::Seconds(30), /*owner=*/11);
  EXPECT_EQ(pulls_.Drop([](const ParkedPull& p) { return p.owner == 11; }, absl::CancelledError("gone"), 4), 2);
  EXPECT_THAT(Ids(), ElementsAre(1, 3));
  for (const Answer& a : answers_) {
    EXPECT_EQ(a.status, absl::CancelledError("gone"));
    EXPECT_EQ(a.version, 4);
  }
  EXPECT_EQ(pulls_.size(), 1);
  EXPECT_EQ(pulls_.Drop([](const ParkedPull& p) { return p.owner == 11; }, absl::CancelledError("gone"), 4), 0);
}

TEST_F(ParkedPullsTest, FailAllEmptiesTheQueue) {
  Park(1, 0, 5);
  Park(2, 1, 6);
  EXPECT_EQ(pulls_.FailAll(absl::AbortedError("rolled back to step 3"), 3), 2);
  EXPECT_THAT(Ids(), ElementsAre(1, 2));
  EXPECT_EQ(answers_[1].status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(answers_[1].version, 3);
  EXPECT_TRUE(pulls_.empty());
}

TEST_F(ParkedPullsTest, ExpireFailsPullsAtOrPastTheirDeadlineNamingWhoIsMissing) {
  Park(1, 0, 13, absl::Seconds(30));
  Park(2, 1, 13, absl::Seconds(60));
  Park(3, 2, 13, absl::Seconds(31));
  int asked = 0;
  auto waiting_for = [&asked] {
    ++asked;
    return std::string("worker 2 (last heard 31 s ago)");
  };
  EXPECT_EQ(pulls_.Expire(kStart + absl::Seconds(29), 12, 3, waiting_for), 0);
  EXPECT_EQ(asked, 0);  // the text is built only for a pull that expires
  EXPECT_EQ(pulls_.Expire(kStart + absl::Seconds(31), 12, 3, waiting_for), 2);
  EXPECT_EQ(asked, 1);  // once per call, however many expire
  ASSERT_THAT(Ids(), ElementsAre(1, 3));
  EXPECT_EQ(answers_[0].status,
            absl::DeadlineExceededError("step 12 key 3: waiting for worker 2 (last heard 31 s ago); worker 0's pull "
                                        "of version 13 timed out after 31 s"));
  EXPECT_EQ(answers_[0].version, 12);
  EXPECT_EQ(answers_[1].status.message(),
            "step 12 key 3: waiting for worker 2 (last heard 31 s ago); worker 2's pull of version 13 timed out "
            "after 31 s");
  EXPECT_EQ(pulls_.size(), 1);
  EXPECT_EQ(pulls_.Expire(kStart + absl::Seconds(60), 12, 3, waiting_for), 1);
  EXPECT_TRUE(pulls_.empty());
}

}  // namespace
}  // namespace dtrain::kv
