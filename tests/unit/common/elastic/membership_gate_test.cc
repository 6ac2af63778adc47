#include "common/elastic/membership_gate.h"

#include <algorithm>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;

class MembershipGateTest : public ::testing::Test {
 protected:
  MembershipGateTest() : gate_(*MembershipSchedule::Create(1, 4, {{0, {0, 1}}}), [this] { return now_; }) {}

  absl::Time now_ = absl::FromUnixSeconds(1800000000);
  MembershipGate gate_;
};

TEST_F(MembershipGateTest, WithoutAChangeEveryPushOfTheGenerationPassesAndCounts) {
  EXPECT_EQ(gate_.highest_step(), -1);
  EXPECT_TRUE(gate_.AdmitPush(0, 0).ok());
  EXPECT_TRUE(gate_.AdmitPush(7, 0).ok());
  EXPECT_TRUE(gate_.AdmitPush(3, 0).ok());
  EXPECT_EQ(gate_.highest_step(), 7);
  EXPECT_EQ(gate_.AdmitPush(-1, 0).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MembershipGateTest, AProposalHoldsStepsAboveTheHighestTakenUntilItsCommit) {
  ASSERT_TRUE(gate_.AdmitPush(10, 0).ok());
  auto p = gate_.Propose(1);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->highest_step, 10);
  EXPECT_EQ(p->committed_from, -1);
  EXPECT_TRUE(gate_.AdmitPush(10, 0).ok());  // the steps begun finish
  EXPECT_TRUE(gate_.AdmitPush(9, 0).ok());
  now_ += absl::Seconds(3);
  const absl::Status held = gate_.AdmitPush(11, 0);
  EXPECT_EQ(held.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(held.message(), HasSubstr("membership change to generation 1 pending for 3s: step 11 waits for its "
                                        "commit (steps up to 10 go on)"));
  // Asked again (a restarted scheduler): the same answer.
  EXPECT_EQ(gate_.Propose(1)->highest_step, 10);
  EXPECT_EQ(gate_.highest_step(), 10);
}

// A dead worker's removal by rollback: proposed at step 6, the store goes back to its
// snapshot of step 4, and the new generation starts there; the redone step 4 waits for
// the commit.
TEST_F(MembershipGateTest, AfterARollbackTheStepsFromTheSnapshotAreHeldAndTheCommitMayStartThere) {
  ASSERT_TRUE(gate_.AdmitPush(6, 0).ok());
  ASSERT_EQ(gate_.Propose(1)->highest_step, 6);
  EXPECT_EQ(gate_.Commit(1, {4, {0}}).code(), absl::StatusCode::kFailedPrecondition);
  gate_.RolledBack(4);
  EXPECT_EQ(gate_.highest_step(), 3);
  EXPECT_EQ(gate_.AdmitPush(4, 0).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(gate_.Commit(1, {4, {0}}).ok());
  EXPECT_EQ(gate_.AdmitPush(4, 0).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(gate_.AdmitPush(4, 1).ok());
}

TEST_F(MembershipGateTest, AfterTheCommitOldGenerationPushesFromItsStepAreRefusedNamingTheChange) {
  ASSERT_TRUE(gate_.AdmitPush(10, 0).ok());
  ASSERT_TRUE(gate_.Propose(1).ok());
  ASSERT_TRUE(gate_.Commit(1, {11, {0, 1, 3}}).ok());
  const absl::Status old = gate_.AdmitPush(11, 0);
  EXPECT_EQ(old.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(old.message(), "membership changed from step 11: generation 1, workers {0,1,3}");
  EXPECT_EQ(gate_.AdmitPush(12, 0).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(gate_.AdmitPush(10, 0).ok());  // a step before the change: the old workers'
  EXPECT_TRUE(gate_.AdmitPush(11, 1).ok());
  EXPECT_THAT(gate_.AdmitPush(11, 2).message(), HasSubstr("generation 2 is not committed on this server yet"));
  EXPECT_EQ(gate_.AdmitPush(11, 2).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gate_.RanksAt(10), (std::vector<int>{0, 1}));
  EXPECT_EQ(gate_.RanksAt(11), (std::vector<int>{0, 1, 3}));
  EXPECT_TRUE(gate_.Holds(11, 3));
  EXPECT_FALSE(gate_.Holds(10, 3));
  EXPECT_EQ(gate_.CountAt(11), 3);
  EXPECT_EQ(gate_.DescribeAt(12), "generation 1 from step 11, workers {0,1,3}");
}

TEST_F(MembershipGateTest, CommitNeedsItsProposalAndAStepAboveTheHighestTaken) {
  ASSERT_TRUE(gate_.AdmitPush(10, 0).ok());
  EXPECT_THAT(gate_.Commit(1, {11, {0}}).message(), HasSubstr("was not proposed to this server"));
  EXPECT_THAT(gate_.Propose(2).status().message(), HasSubstr("runs generation 0, so the next is 1"));
  ASSERT_TRUE(gate_.Propose(1).ok());
  const absl::Status early = gate_.Commit(1, {10, {0}});
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(early.message(), HasSubstr("cannot start at step 10: this server lets steps up to 10 go on"));
  EXPECT_EQ(gate_.Commit(1, {11, {0, 9}}).code(), absl::StatusCode::kInvalidArgument);  // rank 9 >= MAX 4
  // Nothing changed: still proposed, still generation 0.
  EXPECT_EQ(gate_.schedule().generations().size(), 1u);
  EXPECT_EQ(gate_.AdmitPush(11, 0).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(gate_.Commit(1, {11, {0}}).ok());
  // Again: the same is OK (a retried commit), another is refused; Propose names the start.
  EXPECT_TRUE(gate_.Commit(1, {11, {0}}).ok());
  EXPECT_THAT(gate_.Commit(1, {12, {0}}).message(), HasSubstr("committed already"));
  EXPECT_EQ(gate_.Propose(1)->committed_from, 11);
}

TEST_F(MembershipGateTest, AbortLetsPushesFlowAgain) {
  ASSERT_TRUE(gate_.AdmitPush(4, 0).ok());
  ASSERT_TRUE(gate_.Propose(1).ok());
  EXPECT_FALSE(gate_.AdmitPush(5, 0).ok());
  ASSERT_TRUE(gate_.Abort(1).ok());
  EXPECT_TRUE(gate_.AdmitPush(5, 0).ok());
  EXPECT_EQ(gate_.Propose(1)->highest_step, 5);
}

TEST_F(MembershipGateTest, AProposalNotBeforeAStepLetsTheStepsBeforeItGoOn) {
  ASSERT_TRUE(gate_.AdmitPush(10, 0).ok());
  auto p = gate_.Propose(1, /*not_before=*/15);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->highest_step, 10);
  EXPECT_TRUE(gate_.AdmitPush(14, 0).ok());
  EXPECT_EQ(gate_.AdmitPush(15, 0).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gate_.Propose(1, 15)->highest_step, 10);  // the same answer again
  EXPECT_FALSE(gate_.Commit(1, {14, {0}}).ok());
  EXPECT_TRUE(gate_.Commit(1, {15, {0}}).ok());
}

// A dead worker's removal: every key waits at step 10 with some of its pushes taken.
TEST_F(MembershipGateTest, ADropCommitStartsAtTheHighestStepTakenAfterItsDrop) {
  ASSERT_TRUE(gate_.AdmitPush(10, 0).ok());
  ASSERT_EQ(gate_.Propose(1)->highest_step, 10);
  // A plain commit must start after the steps let through.
  EXPECT_EQ(gate_.Commit(1, {10, {0}}).code(), absl::StatusCode::kFailedPrecondition);
  int drops = 0;
  const absl::Status s = gate_.CommitDroppingStep(1, {10, {0}}, [&] {
    ++drops;
    // The drop runs before the commit is made: pushes of step 10 are not taken meanwhile
    // (the gate's state is not read here: a drop must not call back into it).
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(drops, 1);
  const absl::Status old = gate_.AdmitPush(10, 0);
  EXPECT_EQ(old.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(old.message(), "membership changed from step 10: generation 1, workers {0}");
  EXPECT_EQ(old, MembershipChangedError(1, {10, {0}}));
  EXPECT_TRUE(gate_.AdmitPush(10, 1).ok());  // the survivor redoes step 10
  // Asked again (the order repeats until answered): OK, and nothing is dropped twice.
  EXPECT_TRUE(gate_
                  .CommitDroppingStep(1, {10, {0}},
                                      [&] {
                                        ++drops;
                                        return absl::OkStatus();
                                      })
                  .ok());
  EXPECT_EQ(drops, 1);
}

TEST_F(MembershipGateTest, ADropCommitBelowTheStepsLetThroughIsRefusedWithoutDropping) {
  ASSERT_TRUE(gate_.AdmitPush(10, 0).ok());
  ASSERT_TRUE(gate_.Propose(1).ok());
  bool dropped = false;
  const absl::Status s = gate_.CommitDroppingStep(1, {9, {0}}, [&] {
    dropped = true;
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cannot start at step 9: this server lets steps up to 10 go on"));
  EXPECT_FALSE(dropped);
  // Not proposed: refused before anything is dropped either.
  EXPECT_EQ(gate_
                .CommitDroppingStep(2, {11, {0}},
                                    [&] {
                                      dropped = true;
                                      return absl::OkStatus();
                                    })
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(dropped);
}

TEST_F(MembershipGateTest, ADropThatFailsCommitsNothing) {
  ASSERT_TRUE(gate_.AdmitPush(10, 0).ok());
  ASSERT_TRUE(gate_.Propose(1).ok());
  const absl::Status s =
      gate_.CommitDroppingStep(1, {10, {0}}, [] { return absl::FailedPreconditionError("key 3 is at version 11"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "key 3 is at version 11");
  EXPECT_EQ(gate_.schedule().generations().size(), 1u);
  EXPECT_TRUE(gate_.AdmitPush(10, 0).ok());                                  // still generation 0's step
  EXPECT_EQ(gate_.AdmitPush(11, 0).code(), absl::StatusCode::kUnavailable);  // the proposal still holds
}

// A joiner (worker 2, generation 1 from step 10) died before its first step: the
// survivors' pushes of step 10 wait for it, and its removal replaces generation 1 from
// the same step, dropping them. Generation 1 then merges no step.
TEST_F(MembershipGateTest, ADropCommitReplacesAGenerationThatMergedNoStepFromItsOwnStep) {
  ASSERT_TRUE(gate_.AdmitPush(9, 0).ok());
  ASSERT_TRUE(gate_.Propose(1).ok());
  ASSERT_TRUE(gate_.Commit(1, {10, {0, 1, 2}}).ok());
  ASSERT_TRUE(gate_.AdmitPush(10, 1).ok());
  ASSERT_EQ(gate_.Propose(2)->highest_step, 10);
  // A plain commit there would merge step 10's pushes taken already with other workers.
  EXPECT_EQ(gate_.Commit(2, {10, {0, 1}}).code(), absl::StatusCode::kFailedPrecondition);
  int drops = 0;
  const absl::Status s = gate_.CommitDroppingStep(2, {10, {0, 1}}, [&] {
    ++drops;
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(drops, 1);
  EXPECT_EQ(gate_.schedule().generations().size(), 3u);
  EXPECT_TRUE(gate_.schedule().ZeroLength(1));
  EXPECT_EQ(gate_.CountAt(10), 2);
  EXPECT_EQ(gate_.RanksAt(10), (std::vector<int>{0, 1}));
  EXPECT_FALSE(gate_.Holds(10, 2));
  EXPECT_EQ(gate_.CountAt(9), 2);
  EXPECT_EQ(gate_.DescribeAt(10), "generation 2 from step 10, workers {0,1}");
  // The survivors' pushes of generation 1 are refused naming the replacement; they redo step 10.
  EXPECT_EQ(gate_.AdmitPush(10, 1), MembershipChangedError(2, {10, {0, 1}}));
  EXPECT_EQ(gate_.AdmitPush(10, 0), MembershipChangedError(1, {10, {0, 1, 2}}));
  EXPECT_TRUE(gate_.AdmitPush(10, 2).ok());
}

// Generation 1 merged step 10 (a push of step 11 was taken): it cannot be replaced from
// its own step, drop or not.
TEST_F(MembershipGateTest, AGenerationThatMergedAStepIsNotReplacedFromItsOwnStep) {
  ASSERT_TRUE(gate_.Propose(1).ok());
  ASSERT_TRUE(gate_.Commit(1, {10, {0, 1, 2}}).ok());
  ASSERT_TRUE(gate_.AdmitPush(11, 1).ok());
  ASSERT_TRUE(gate_.Propose(2).ok());
  bool dropped = false;
  const absl::Status s = gate_.CommitDroppingStep(2, {10, {0, 1}}, [&] {
    dropped = true;
    return absl::OkStatus();
  });
  EXPECT_THAT(s.message(), HasSubstr("cannot start at step 10: this server lets steps up to 11 go on"));
  EXPECT_FALSE(dropped);
  EXPECT_EQ(gate_.Commit(2, {10, {0, 1}}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gate_.schedule().generations().size(), 2u);
}

TEST_F(MembershipGateTest, PushIfAdmittedRunsThePushOnlyWhenAdmittedAndAnswersItsStatus) {
  int pushes = 0;
  auto push = [&] {
    ++pushes;
    return absl::InvalidArgumentError("the store's refusal");
  };
  EXPECT_EQ(gate_.PushIfAdmitted(4, 0, push).message(), "the store's refusal");
  EXPECT_EQ(pushes, 1);
  EXPECT_EQ(gate_.highest_step(), 4);
  EXPECT_EQ(gate_.PushIfAdmitted(4, 1, push).code(), absl::StatusCode::kUnavailable);  // not committed yet
  ASSERT_TRUE(gate_.Propose(1).ok());
  EXPECT_EQ(gate_.PushIfAdmitted(5, 0, push).code(), absl::StatusCode::kUnavailable);  // held
  EXPECT_EQ(pushes, 1);
}

// Two servers that have taken different steps when the change is proposed: S = the
// highest + 1, and neither takes a push of step >= S from the old generation.
TEST(MembershipGateExchangeTest, NoServerTakesAnOldGenerationPushFromTheCommittedStep) {
  const MembershipSchedule start = *MembershipSchedule::Create(1, 4, {{0, {0, 1, 2}}});
  MembershipGate a(start), b(start);
  ASSERT_TRUE(a.AdmitPush(10, 0).ok());  // worker pushed step 10 to a first
  ASSERT_TRUE(b.AdmitPush(9, 0).ok());
  const int64_t ha = a.Propose(1)->highest_step;
  const int64_t hb = b.Propose(1)->highest_step;
  const int64_t s = std::max(ha, hb) + 1;
  EXPECT_EQ(s, 11);
  EXPECT_EQ(b.AdmitPush(10, 0).code(), absl::StatusCode::kUnavailable);  // held until the commit
  const Generation next{s, {0, 2}};                                      // worker 1 leaves
  ASSERT_TRUE(a.Commit(1, next).ok());
  ASSERT_TRUE(b.Commit(1, next).ok());
  EXPECT_TRUE(b.AdmitPush(10, 0).ok());  // step 10 is still the old workers'
  for (MembershipGate* g : {&a, &b}) {
    EXPECT_EQ(g->AdmitPush(11, 0).code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(g->AdmitPush(11, 1).ok());
    EXPECT_EQ(g->CountAt(10), 3);
    EXPECT_EQ(g->CountAt(11), 2);
  }
}

}  // namespace
}  // namespace dtrain::elastic
