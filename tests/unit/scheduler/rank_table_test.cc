#include "services/scheduler/rank_table.h"

#include <vector>

#include <gtest/gtest.h>

namespace dtrain::scheduler {
namespace {

RankOccupant Held(uint64_t incarnation, bool live = true, bool provisional = false) {
  RankOccupant o;
  o.present = true;
  o.live = live;
  o.provisional = provisional;
  o.incarnation = incarnation;
  o.pid = 77;
  o.hostname = "host-b";
  o.state = live ? "NODE_STATE_ALIVE" : "NODE_STATE_DEAD";
  return o;
}

bool Says(const absl::Status& s, absl::StatusCode code, const std::string& text) {
  return s.code() == code && s.message().find(text) != absl::string_view::npos;
}

TEST(RankTableTest, UnrequestedRanksGoToTheLowestFreeThenTheLowestDead) {
  RankTable t(Role::kWorker, 3);
  int moved = 0;
  std::vector<RankOccupant> ranks(3);
  EXPECT_EQ(*t.Pick(-1, 0, false, ranks, &moved), 0);
  ranks[0] = Held(1);
  EXPECT_EQ(*t.Pick(-1, 0, false, ranks, &moved), 1);
  ranks[1] = Held(1, /*live=*/false);
  EXPECT_EQ(*t.Pick(-1, 0, false, ranks, &moved), 2);
  ranks[2] = Held(1);
  // Every rank held: the dead node's is taken (a restart).
  EXPECT_EQ(*t.Pick(-1, 0, true, ranks, &moved), 1);
  EXPECT_EQ(moved, -1);
  ranks[1] = Held(2);
  EXPECT_TRUE(Says(t.Pick(-1, 0, true, ranks, &moved).status(), absl::StatusCode::kResourceExhausted,
                   "all 3 worker ranks are held by live nodes"));
}

TEST(RankTableTest, RefusesRanksPastTheJobAndRanksHeldByLiveNodes) {
  RankTable t(Role::kServer, 2);
  int moved = 0;
  std::vector<RankOccupant> ranks = {Held(1), RankOccupant()};
  EXPECT_TRUE(Says(t.Pick(2, 0, false, ranks, &moved).status(), absl::StatusCode::kInvalidArgument,
                   "requested server rank 2 but the job has 2 servers (ranks 0..1)"));
  EXPECT_TRUE(Says(t.Pick(0, 0, false, ranks, &moved).status(), absl::StatusCode::kAlreadyExists,
                   "server rank 0 is already held by pid 77 on host-b (NODE_STATE_ALIVE)"));
  ranks[0] = Held(1, /*live=*/false);
  EXPECT_EQ(*t.Pick(0, 0, true, ranks, &moved), 0);
}

TEST(RankTableTest, ARequestTakesAProvisionalRankBeforeTheJobStarts) {
  RankTable t(Role::kWorker, 2);
  int moved = -1;
  std::vector<RankOccupant> ranks = {Held(1, true, /*provisional=*/true), RankOccupant()};
  EXPECT_EQ(*t.Pick(0, 0, false, ranks, &moved), 0);
  EXPECT_EQ(moved, 1);
  // Once the job started a provisional holder is an ordinary one.
  EXPECT_EQ(t.Pick(0, 0, true, ranks, &moved).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(moved, -1);
  // No free rank to move to: the holder stays.
  ranks[1] = Held(1);
  EXPECT_EQ(t.Pick(0, 0, false, ranks, &moved).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(moved, -1);
}

TEST(RankTableTest, AHeldIncarnationTakesTheRankFromOlderOnesAndIsFencedByNewer) {
  RankTable t(Role::kWorker, 2);
  int moved = 0;
  std::vector<RankOccupant> ranks = {Held(2), RankOccupant()};
  EXPECT_EQ(*t.Pick(0, 3, true, ranks, &moved), 0);
  EXPECT_EQ(*t.Pick(0, 2, true, ranks, &moved), 0);
  EXPECT_TRUE(Says(t.Pick(0, 1, true, ranks, &moved).status(), absl::StatusCode::kFailedPrecondition,
                   "fenced: worker 0 incarnation 1 replaced by 2 (pid 77 on host-b)"));
}

TEST(RankTableTest, IncarnationsCountNewProcessesOnceTheJobStarted) {
  RankTable t(Role::kWorker, 2);
  EXPECT_EQ(t.Admit(0, 0, /*started=*/false), 1u);
  EXPECT_EQ(t.Admit(0, 0, false), 1u);  // before the start nobody is fenced
  EXPECT_EQ(t.Admit(0, 0, /*started=*/true), 2u);
  EXPECT_EQ(t.Admit(0, 0, true), 3u);
  // A process that holds an incarnation keeps it; the count follows it up.
  EXPECT_EQ(t.Admit(1, 5, true), 5u);
  EXPECT_EQ(t.Admit(1, 0, true), 6u);
}

TEST(RankTableTest, AReplacementGoesAboveWhatTheServersAdmitted) {
  RankTable t(Role::kWorker, 3);
  EXPECT_EQ(t.Admit(0, 0, false), 1u);
  EXPECT_EQ(t.Replace(0), 2u);
  t.NoteAdmittedElsewhere(1, 4);
  t.NoteAdmittedElsewhere(1, 3);  // the newest report does not lower the floor
  EXPECT_EQ(t.Replace(1), 5u);
  EXPECT_EQ(t.Admit(1, 0, true), 6u);
  EXPECT_EQ(t.Replace(2), 2u);  // unknown elsewhere: above the first incarnation
}

}  // namespace
}  // namespace dtrain::scheduler
