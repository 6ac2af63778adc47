#include "services/scheduler/heartbeat_gates.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::scheduler {
namespace {

using ::testing::HasSubstr;
using v1::MembershipOrder;
using v1::MembershipReport;

MembershipReport Answer(const MembershipOrder& order) {
  MembershipReport r;
  r.set_generation(order.generation());
  r.set_phase(order.phase());
  return r;
}

TEST(HeartbeatGatesTest, AProposalWaitsForTheServersReportAndIsSentUntilAnswered) {
  HeartbeatGates gates(2);
  EXPECT_FALSE(gates.OrderFor(0).has_value());
  const auto waiting = gates.Propose(1, 3, 20);
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(waiting.status().message(), "waiting for server 1's answer to the proposal of generation 3");
  EXPECT_FALSE(gates.OrderFor(0).has_value());  // only the server asked
  // The order goes out on every heartbeat response until the report answers it.
  for (int beat = 0; beat < 2; ++beat) {
    const auto order = gates.OrderFor(1);
    ASSERT_TRUE(order.has_value());
    EXPECT_EQ(order->phase(), MembershipOrder::PHASE_PROPOSE);
    EXPECT_EQ(order->generation(), 3);
    EXPECT_EQ(order->not_before(), 20);
    gates.Report(1, 1, MembershipReport());  // a heartbeat from before the order arrived
  }
  MembershipReport answer = Answer(*gates.OrderFor(1));
  answer.set_highest_step(41);
  answer.set_committed_from(-1);
  gates.Report(1, 1, answer);
  EXPECT_FALSE(gates.OrderFor(1).has_value());
  const auto proposal = gates.Propose(1, 3, 20);
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  EXPECT_EQ(proposal->highest_step, 41);
  EXPECT_EQ(proposal->committed_from, -1);
}

TEST(HeartbeatGatesTest, ACommitCarriesItsGenerationAndTheDropAndChecksTheStepCommitted) {
  HeartbeatGates gates(1);
  const elastic::Generation next{181, {0, 1, 2}};
  EXPECT_EQ(gates.Commit(0, 2, next, /*drop_pending=*/true).code(), absl::StatusCode::kUnavailable);
  const auto order = gates.OrderFor(0);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->phase(), MembershipOrder::PHASE_COMMIT);
  EXPECT_TRUE(order->drop_pending());
  EXPECT_EQ(order->next().from_step(), 181);
  EXPECT_EQ(order->next().ranks_size(), 3);
  MembershipReport answer = Answer(*order);
  answer.set_committed_from(180);
  gates.Report(0, 1, answer);
  EXPECT_THAT(gates.Commit(0, 2, next, true).message(),
              HasSubstr("server 0 committed generation 2 from step 180, not from step 181"));
  answer.set_committed_from(181);
  gates.Report(0, 1, answer);
  EXPECT_TRUE(gates.Commit(0, 2, next, true).ok());
}

TEST(HeartbeatGatesTest, AServersErrorIsReturnedAndANewOrderReplacesTheOld) {
  HeartbeatGates gates(1);
  ASSERT_EQ(gates.Propose(0, 1, 0).status().code(), absl::StatusCode::kUnavailable);
  MembershipReport refused = Answer(*gates.OrderFor(0));
  refused.set_error("expected generation 2");
  gates.Report(0, 1, refused);
  const auto p = gates.Propose(0, 1, 0);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(p.status().message(), HasSubstr("server 0 refused the proposal of generation 1: expected generation 2"));
  // A proposal of the committed generation answers where it starts.
  ASSERT_EQ(gates.Propose(0, 2, 0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(gates.OrderFor(0)->generation(), 2);
  MembershipReport committed = Answer(*gates.OrderFor(0));
  committed.set_committed_from(90);
  gates.Report(0, 1, committed);
  EXPECT_EQ(gates.Propose(0, 2, 0)->committed_from, 90);
  EXPECT_EQ(gates.Propose(5, 2, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HeartbeatGatesTest, ARestartedServerIsAskedAgainAndAFencedOnesReportIsIgnored) {
  HeartbeatGates gates(1);
  ASSERT_EQ(gates.Propose(0, 1, 0).status().code(), absl::StatusCode::kUnavailable);
  gates.Report(0, 1, Answer(*gates.OrderFor(0)));
  ASSERT_TRUE(gates.Propose(0, 1, 0).ok());
  gates.Heard(0, 1);  // a heartbeat without a report: the answer stands
  ASSERT_TRUE(gates.Propose(0, 1, 0).ok());
  gates.Heard(0, 2);  // a new process holds the rank: it has not answered
  EXPECT_EQ(gates.Propose(0, 1, 0).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(gates.OrderFor(0).has_value());
  gates.Report(0, 1, Answer(*gates.OrderFor(0)));  // the old process, fenced
  EXPECT_EQ(gates.Propose(0, 1, 0).status().code(), absl::StatusCode::kUnavailable);
  gates.Report(0, 2, Answer(*gates.OrderFor(0)));
  EXPECT_TRUE(gates.Propose(0, 1, 0).ok());
}

}  // namespace
}  // namespace dtrain::scheduler
