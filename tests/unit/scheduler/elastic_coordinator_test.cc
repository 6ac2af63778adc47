#include "services/scheduler/elastic_coordinator.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::scheduler {
namespace {

using elastic::MembershipGate;
using elastic::MembershipSchedule;
using ::testing::HasSubstr;

// Parameter servers as their gates, with a commit failure to inject.
class GateServers : public ServerGates {
 public:
  GateServers(const MembershipSchedule& start, int n) {
    for (int i = 0; i < n; ++i) gates.push_back(std::make_unique<MembershipGate>(start));
  }
  int num_servers() const override { return static_cast<int>(gates.size()); }
  absl::StatusOr<MembershipGate::Proposal> Propose(int server, int generation, int64_t not_before) override {
    return gates[server]->Propose(generation, not_before);
  }
  absl::Status Commit(int server, int generation, const elastic::Generation& next, bool drop_pending) override {
    drop_pending_seen = drop_pending_seen || drop_pending;
    if (server == fail_commit_of) {
      fail_commit_of = -1;
      return absl::UnavailableError("server 1 unreachable");
    }
    if (drop_pending) {
      return gates[server]->CommitDroppingStep(generation, next, [&] {
        ++drops;
        return absl::OkStatus();
      });
    }
    return gates[server]->Commit(generation, next);
  }

  std::vector<std::unique_ptr<MembershipGate>> gates;
  int fail_commit_of = -1;
  bool drop_pending_seen = false;
  int drops = 0;  // the servers' drops of a step's pending pushes
};

TEST(ElasticCoordinatorTest, AJoinerGetsTheLowestFreeRankFromTheStepAfterTheHighestTaken) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  GateServers servers(start, 2);
  auto c = ElasticCoordinator::Create(start, std::nullopt);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(servers.gates[0]->AdmitPush(10, 0).ok());
  ASSERT_TRUE(servers.gates[1]->AdmitPush(9, 0).ok());
  EXPECT_FALSE(c->HasPendingChange());
  EXPECT_EQ(*c->Join(), 2);
  auto line = c->RunChange(servers);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "worker 2 joined at step 11: 3 workers from now");
  EXPECT_FALSE(c->HasPendingChange());
  for (auto& g : servers.gates) EXPECT_TRUE(g->schedule() == c->schedule());
  EXPECT_EQ(servers.gates[1]->AdmitPush(11, 0).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(*c->Join(), 3);
  const auto full = c->Join();
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("--elastic 2:4, workers {0,1,2}, joining {3}"));
}

TEST(ElasticCoordinatorTest, LeavesGoOnToMinAndNoFurther) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1, 2}}});
  GateServers servers(start, 1);
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  EXPECT_THAT(c.RunChange(servers).status().message(), HasSubstr("no join or leave is pending"));
  ASSERT_TRUE(c.Leave(1).ok());
  ASSERT_TRUE(c.Leave(1).ok());  // repeated notice
  EXPECT_EQ(*c.Join(), 3);       // rank 1 is still held until its leave is committed
  EXPECT_EQ(*c.RunChange(servers), "worker 3 joined and worker 1 left at step 1: 3 workers from now");
  ASSERT_TRUE(c.Leave(0).ok());
  ASSERT_TRUE(c.Leave(2).ok());
  const auto below = c.RunChange(servers);
  EXPECT_EQ(below.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(below.status().message(),
              HasSubstr("only 1 worker would remain ({3}), below --elastic's MIN 2: waiting for a worker to join"));
  EXPECT_EQ(servers.gates[0]->schedule().generations().size(), 2u);  // nothing proposed
  EXPECT_EQ(*c.Join(), 1);
  EXPECT_EQ(*c.RunChange(servers), "worker 1 joined and workers 0, 2 left at step 2: 2 workers from now");
  EXPECT_EQ(c.Leave(0).code(), absl::StatusCode::kNotFound);
}

TEST(ElasticCoordinatorTest, AFailedCommitIsRetriedWithTheSameStep) {
  const MembershipSchedule start = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}});
  GateServers servers(start, 2);
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  ASSERT_TRUE(servers.gates[0]->AdmitPush(7, 0).ok());
  ASSERT_TRUE(c.Leave(1).ok());
  servers.fail_commit_of = 1;
  EXPECT_EQ(c.RunChange(servers).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(c.schedule().generations().size(), 1u);
  // Server 1 still holds steps above its highest (none) until the commit comes.
  EXPECT_EQ(servers.gates[1]->AdmitPush(8, 0).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(*c.RunChange(servers), "worker 1 left at step 8: 1 worker from now");
  EXPECT_TRUE(servers.gates[1]->schedule() == c.schedule());
}

TEST(ElasticCoordinatorTest, AReplayCommitsTheRecordedGenerationsAtTheirSteps) {
  const MembershipSchedule recorded = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {20, {0, 1, 2}}, {30, {0, 2}}});
  const MembershipSchedule start = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}});
  GateServers servers(start, 2);
  auto c = *ElasticCoordinator::Create(start, recorded);
  ASSERT_TRUE(servers.gates[0]->AdmitPush(5, 0).ok());
  ASSERT_TRUE(c.Leave(1).ok());  // recorded for generation 2: held
  const auto waits = c.RunChange(servers);
  EXPECT_EQ(waits.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(waits.status().message(), HasSubstr("generation 1 from step 20 waits for worker 2 to join"));
  // Proposed already: the servers hold the recorded step until the joiner comes, so a
  // joiner started late cannot let the job run past it.
  EXPECT_TRUE(servers.gates[1]->AdmitPush(19, 0).ok());
  EXPECT_EQ(servers.gates[1]->AdmitPush(20, 0).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(*c.Join(), 2);
  EXPECT_EQ(*c.RunChange(servers), "worker 2 joined at step 20: 3 workers from now");
  EXPECT_TRUE(servers.gates[0]->AdmitPush(19, 0).ok());
  EXPECT_EQ(servers.gates[0]->AdmitPush(20, 0).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(*c.RunChange(servers), "worker 1 left at step 30: 2 workers from now");
  EXPECT_TRUE(c.schedule() == recorded);
  EXPECT_THAT(c.Join().status().message(), HasSubstr("no worker rank is free"));  // the recording has no more
}

TEST(ElasticCoordinatorTest, AReplayHoldsAnEarlyJoinerUntilItsRecordedGeneration) {
  const MembershipSchedule recorded = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {20, {0}}, {30, {0, 3}}});
  const MembershipSchedule start = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}});
  GateServers servers(start, 1);
  auto c = *ElasticCoordinator::Create(start, recorded);
  EXPECT_EQ(*c.Join(), 3);  // joins in generation 2, after worker 1 leaves in generation 1
  EXPECT_THAT(c.RunChange(servers).status().message(),
              HasSubstr("generation 1 from step 20 waits for worker 1 to leave"));
  ASSERT_TRUE(c.Leave(1).ok());
  EXPECT_EQ(*c.RunChange(servers), "worker 1 left at step 20: 1 worker from now");
  EXPECT_TRUE(c.HasPendingChange());  // the joiner, for step 30
  EXPECT_EQ(*c.RunChange(servers), "worker 3 joined at step 30: 2 workers from now");
  EXPECT_TRUE(c.schedule() == recorded);
}

TEST(ElasticCoordinatorTest, AReplayPastItsStepOrDifferingFromTheJobIsRefused) {
  const MembershipSchedule recorded = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}, {20, {0}}});
  const MembershipSchedule start = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}});
  GateServers servers(start, 2);
  auto c = *ElasticCoordinator::Create(start, recorded);
  ASSERT_TRUE(servers.gates[1]->AdmitPush(25, 0).ok());
  ASSERT_TRUE(c.Leave(1).ok());
  EXPECT_THAT(c.RunChange(servers).status().message(),
              HasSubstr("cannot replay generation 1 from step 20: server 1 took a push of step 25 already"));
  const MembershipSchedule other = *MembershipSchedule::Create(1, 4, {{0, {0, 2}}});
  EXPECT_THAT(ElasticCoordinator::Create(start, other).status().message(),
              HasSubstr("differs from the job's at generation 0"));
  const MembershipSchedule bounds = *MembershipSchedule::Create(1, 5, {{0, {0, 1}}});
  EXPECT_THAT(ElasticCoordinator::Create(start, bounds).status().message(),
              HasSubstr("bounds 1:5 are not the job's 1:4"));
}

TEST(ElasticCoordinatorTest, AJoinerMayAskForAFreeRank) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  GateServers servers(start, 1);
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  EXPECT_EQ(c.JoinAs(1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(c.JoinAs(4).message(), HasSubstr("outside the job's ranks 0..3 (--elastic 2:4)"));
  ASSERT_TRUE(c.JoinAs(3).ok());
  EXPECT_TRUE(c.Holds(3));
  EXPECT_EQ(c.JoinAs(3).code(), absl::StatusCode::kAlreadyExists);  // given to a joiner already
  EXPECT_EQ(*c.Join(), 2);                                          // the lowest rank left
  EXPECT_EQ(c.WorkersAfterChange(), 4);
  EXPECT_EQ(*c.RunChange(servers), "workers 2, 3 joined at step 1: 4 workers from now");
}

TEST(ElasticCoordinatorTest, AJoinerDoesNotTakeTheRankOfALeaverThatStillRuns) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1, 2}}});
  GateServers servers(start, 1);
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  ASSERT_TRUE(c.Leave(2).ok());
  ASSERT_EQ(*c.RunChange(servers), "worker 2 left at step 1: 2 workers from now");
  // Rank 2's process has not exited yet (busy): the joiner gets 3, the next one none.
  EXPECT_EQ(*c.Join({2}), 3);
  EXPECT_EQ(c.Join({2}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*c.Join(), 2);  // gone now
}

TEST(ElasticCoordinatorTest, ARemovalCommitsFromTheStepGivenWhateverTheServersTook) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1, 2}}});
  GateServers servers(start, 2);
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  ASSERT_TRUE(servers.gates[0]->AdmitPush(12, 0).ok());
  ASSERT_TRUE(c.Leave(2).ok());
  EXPECT_EQ(c.WorkersAfterChange(), 2);
  EXPECT_THAT(c.RunChangeFrom(servers, 0, true).status().message(),
              HasSubstr("cannot start at step 0: generation 0 from step 0"));
  EXPECT_EQ(servers.gates[0]->schedule().generations().size(), 1u);
  auto line = c.RunChangeFrom(servers, 20, /*drop_pending=*/true);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "worker 2 left at step 20: 2 workers from now");
  EXPECT_TRUE(servers.drop_pending_seen);
  EXPECT_EQ(c.schedule().latest().from_step, 20);
  EXPECT_FALSE(c.HasPendingChange());
}

}  // namespace
}  // namespace dtrain::scheduler

namespace dtrain::scheduler {
namespace {

// A scheduler restarted after server 0 committed generation 1 and before server 1 did
// (its proposal still holds): the restarted one knows generation 0 only, takes generation
// 1 up from server 0's report and commits it to every server as it is.
TEST(ElasticCoordinatorTest, ARestartedSchedulerTakesUpTheGenerationsTheServersHold) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  GateServers servers(start, 2);
  ASSERT_TRUE(servers.gates[0]->AdmitPush(6, 0).ok());
  for (auto& gate : servers.gates) ASSERT_TRUE(gate->Propose(1, 0).ok());
  const elastic::Generation one{7, {0, 1, 2}};
  ASSERT_TRUE(servers.gates[0]->Commit(1, one).ok());

  auto restarted = *ElasticCoordinator::Create(start, std::nullopt);
  EXPECT_FALSE(restarted.HasPendingChange());
  ASSERT_TRUE(restarted.TakeUp(servers.gates[0]->schedule().generations()).ok());
  EXPECT_TRUE(restarted.HasPendingChange());
  EXPECT_EQ(*restarted.RunChange(servers), "worker 2 joined at step 7: 3 workers from now (taken up from the servers)");
  EXPECT_EQ(restarted.schedule().generations().size(), 2u);
  EXPECT_TRUE(servers.gates[1]->schedule() == restarted.schedule());
  EXPECT_FALSE(restarted.HasPendingChange());
  // Held again (the next report): nothing more.
  ASSERT_TRUE(restarted.TakeUp(servers.gates[0]->schedule().generations()).ok());
  EXPECT_FALSE(restarted.HasPendingChange());
}

TEST(ElasticCoordinatorTest, AServerScheduleThatDoesNotExtendTheSchedulersIsRefused) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  const std::vector<elastic::Generation> other = {{0, {0, 2}}, {7, {0, 1, 2}}};
  EXPECT_THAT(c.TakeUp(other).message(), HasSubstr("a server's generation 0 (from step 0, workers {0,2}) differs"));
  EXPECT_FALSE(c.HasPendingChange());
}

}  // namespace
}  // namespace dtrain::scheduler

namespace dtrain::scheduler {
namespace {

// Worker 2 joins from step 7, the survivors push step 7 in generation 1, and worker 2
// dies before its push: every key waits at version 7, so its removal (the step PlanDrop
// picks) replaces generation 1 from step 7, which is left zero-length.
TEST(ElasticCoordinatorTest, AJoinerThatNeverSteppedIsReplacedFromItsJoinStep) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  GateServers servers(start, 2);
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  for (auto& gate : servers.gates) ASSERT_TRUE(gate->AdmitPush(6, 0).ok());
  ASSERT_EQ(*c.Join(), 2);
  ASSERT_EQ(*c.RunChange(servers), "worker 2 joined at step 7: 3 workers from now");
  for (auto& gate : servers.gates) ASSERT_TRUE(gate->AdmitPush(7, 1).ok());
  ASSERT_TRUE(c.Leave(2).ok());
  // Without the drop the step's pushes would merge with other workers: refused.
  EXPECT_THAT(c.RunChangeFrom(servers, 7, /*drop_pending=*/false).status().message(),
              HasSubstr("cannot start at step 7: generation 1 from step 7, workers {0,1,2} started there"));
  EXPECT_THAT(c.RunChangeFrom(servers, 6, /*drop_pending=*/true).status().message(),
              HasSubstr("cannot start at step 6"));
  auto line = c.RunChangeFrom(servers, 7, /*drop_pending=*/true);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "worker 2 left at step 7: 2 workers from now");
  EXPECT_EQ(servers.drops, 2);
  ASSERT_EQ(c.schedule().generations().size(), 3u);
  EXPECT_TRUE(c.schedule().ZeroLength(1));
  EXPECT_EQ(c.schedule().IndexAt(7), 2);
  for (auto& gate : servers.gates) {
    EXPECT_TRUE(gate->schedule() == c.schedule());
    EXPECT_EQ(gate->AdmitPush(7, 1).code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(gate->AdmitPush(7, 2).ok());
  }
  EXPECT_FALSE(c.HasPendingChange());
  // Its rank is free again, and generation 2 is not replaced from step 7 in turn by a
  // change that did not drop.
  EXPECT_EQ(*c.Join(), 2);
  EXPECT_EQ(*c.RunChange(servers), "worker 2 joined at step 8: 3 workers from now");
}

TEST(ElasticCoordinatorTest, TheFirstGenerationIsNeverReplacedFromItsStep) {
  const MembershipSchedule start = *MembershipSchedule::Create(1, 4, {{0, {0, 1}}});
  GateServers servers(start, 1);
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  ASSERT_TRUE(c.Leave(1).ok());
  EXPECT_THAT(c.RunChangeFrom(servers, 0, /*drop_pending=*/true).status().message(),
              HasSubstr("cannot start at step 0"));
  EXPECT_EQ(servers.drops, 0);
}

// A joiner that failed before its join was committed gives its rank back.
TEST(ElasticCoordinatorTest, AJoinNotCommittedYetIsWithdrawn) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  auto c = *ElasticCoordinator::Create(start, std::nullopt);
  ASSERT_EQ(*c.Join(), 2);
  EXPECT_TRUE(c.HasPendingChange());
  ASSERT_TRUE(c.WithdrawJoin(2).ok());
  EXPECT_FALSE(c.HasPendingChange());
  EXPECT_FALSE(c.Holds(2));
  EXPECT_EQ(c.WithdrawJoin(2).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.WithdrawJoin(0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*c.Join(), 2);
}

// A recording that holds a joiner removed before its first step replays without it: the
// generations that merged steps are committed at their steps, and no worker 2 is awaited
// for the zero-length one.
TEST(ElasticCoordinatorTest, AReplayLeavesOutTheRecordingsZeroLengthGenerations) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  const MembershipSchedule recorded =
      *MembershipSchedule::Create(2, 4, {{0, {0, 1}}, {7, {0, 1, 2}}, {7, {0, 1}}, {12, {0, 1, 2}}});
  GateServers servers(start, 2);
  auto c = *ElasticCoordinator::Create(start, recorded);
  EXPECT_EQ(*c.RunChange(servers), "the same workers went on at step 7: 2 workers from now");
  ASSERT_EQ(*c.Join(), 2);
  EXPECT_EQ(*c.RunChange(servers), "worker 2 joined at step 12: 3 workers from now");
  EXPECT_TRUE(c.schedule() == *WithoutZeroLength(recorded));
  EXPECT_FALSE(c.HasReplayedChangeToCome());
}

// A scheduler restarted after server 0 committed the replacement of a zero-length
// generation and before server 1 did: server 1 is sent it with its drop.
TEST(ElasticCoordinatorTest, ARestartedSchedulerTakesUpAReplacementWithItsDrop) {
  const MembershipSchedule start = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  GateServers servers(start, 2);
  for (auto& gate : servers.gates) {
    ASSERT_TRUE(gate->Propose(1).ok());
    ASSERT_TRUE(gate->Commit(1, {7, {0, 1, 2}}).ok());
    ASSERT_TRUE(gate->AdmitPush(7, 1).ok());
    ASSERT_TRUE(gate->Propose(2).ok());
  }
  ASSERT_TRUE(servers.gates[0]->CommitDroppingStep(2, {7, {0, 1}}, [] { return absl::OkStatus(); }).ok());
  auto restarted = *ElasticCoordinator::Create(start, std::nullopt);
  ASSERT_TRUE(restarted.TakeUp(servers.gates[0]->schedule().generations()).ok());
  ASSERT_TRUE(restarted.RunChange(servers).ok());
  EXPECT_EQ(servers.drops, 0);
  auto line = restarted.RunChange(servers);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "worker 2 left at step 7: 2 workers from now (taken up from the servers)");
  EXPECT_EQ(servers.drops, 1);  // server 1 only: server 0 had committed it
  EXPECT_TRUE(servers.gates[1]->schedule() == restarted.schedule());
}

}  // namespace
}  // namespace dtrain::scheduler
