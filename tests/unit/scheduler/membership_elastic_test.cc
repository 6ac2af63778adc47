// Membership in an elastic job (--elastic): joiners, restarts of ranks in the job,
// dropped workers, and when the job is over; ElasticJob answers who is in the job.
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/scheduler/elastic_job.h"
#include "services/scheduler/membership.h"

namespace dtrain::scheduler {
namespace {

using ::testing::HasSubstr;

Registration Req(Role role, int rank) {
  Registration r;
  r.role = role;
  r.requested_rank = rank;
  r.pid = 4242;
  r.hostname = "host-a";
  return r;
}

class MembershipElasticTest : public ::testing::Test {
 protected:
  // A started job of `n` workers (ranks 0..n-1), --elastic 2:4, one server.
  void Start(int n) {
    ElasticJobOptions eo;
    eo.spec.min_workers = 2;
    eo.spec.max_workers = 4;
    eo.num_workers = n;
    job_ = *ElasticJob::Create(eo);
    MembershipOptions o;
    o.num_workers = n;
    o.num_servers = 1;
    o.elastic = job_.get();
    o.clock = [this] { return now_; };
    m_ = std::make_unique<Membership>(o);
    ASSERT_EQ(m_->Register(Req(Role::kWorker, n)).status().code(), absl::StatusCode::kUnavailable);
    for (int r = 0; r < n; ++r) ASSERT_TRUE(m_->Register(Req(Role::kWorker, -1)).ok());
    ASSERT_TRUE(m_->Register(Req(Role::kServer, -1)).ok());
    ASSERT_TRUE(m_->AllRegistered());
  }
  Membership::Admission Admit(const Registration& r) {
    uint64_t ticket = 0;
    const absl::StatusOr<int> rank = m_->Register(r, &ticket);
    EXPECT_TRUE(rank.ok()) << rank.status();
    EXPECT_EQ(*m_->AwaitAllRegistered(ticket, absl::Now() + absl::Seconds(1), nullptr), *rank);
    return *m_->Admitted(ticket);
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::unique_ptr<ElasticJob> job_;
  std::unique_ptr<Membership> m_;
};

TEST_F(MembershipElasticTest, AJoinerGetsAFreeRankAtOnceAsItsFirstIncarnation) {
  Start(2);
  const Membership::Admission joiner = Admit(Req(Role::kWorker, -1));
  EXPECT_EQ(joiner.node.rank, 2);
  EXPECT_EQ(joiner.node.incarnation, 1u);
  EXPECT_FALSE(joiner.rejoined);
  EXPECT_EQ(joiner.node.restarts, 0);
  EXPECT_TRUE(job_->InJob(2));
  // A pod that asks for a free rank (a Kubernetes Indexed Job) gets that one.
  EXPECT_EQ(Admit(Req(Role::kWorker, 3)).node.rank, 3);
  const auto full = m_->Register(Req(Role::kWorker, -1));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("--elastic 2:4"));
  // A rank in the running job held by a live node: maybe a dead process not yet found
  // so, which the newcomer waits out.
  EXPECT_EQ(m_->Register(Req(Role::kWorker, 1)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(m_->Register(Req(Role::kWorker, 4)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MembershipElasticTest, ARestartedProcessOfARankInTheJobRejoinsAsToday) {
  Start(2);
  ASSERT_TRUE(m_->StreamClosed({Role::kWorker, 1}, 1, "heartbeat stream broke"));
  const Membership::Admission back = Admit(Req(Role::kWorker, 1));
  EXPECT_EQ(back.node.rank, 1);
  EXPECT_EQ(back.node.incarnation, 2u);
  EXPECT_TRUE(back.rejoined);
  EXPECT_EQ(back.node.state, NodeState::kRejoining);
  EXPECT_FALSE(job_->InJob(2));  // no join
}

TEST_F(MembershipElasticTest, ADeadWorkerIsDroppableOnceAndFailsNothing) {
  Start(3);
  ASSERT_TRUE(m_->StreamClosed({Role::kWorker, 2}, 1, "heartbeat stream broke"));
  EXPECT_EQ(m_->Failure(), "");
  EXPECT_TRUE(m_->ExpireRejoinWaits().empty());
  const std::vector<NodeRecord> dropped = m_->DroppableWorkers();
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].rank, 2);
  EXPECT_EQ(dropped[0].death_reason, "heartbeat stream broke");
  EXPECT_TRUE(m_->DroppableWorkers().empty());
}

TEST_F(MembershipElasticTest, TheJobIsOverWhenTheLatestGenerationFinishedWhateverAJoinerDoes) {
  Start(2);
  Admit(Req(Role::kWorker, -1));  // not committed: not in the latest generation
  std::string reason;
  ASSERT_TRUE(m_->Leave({Role::kWorker, 0}, false, "").ok());
  EXPECT_FALSE(m_->JobOver(&reason));
  ASSERT_TRUE(m_->Leave({Role::kWorker, 1}, false, "").ok());
  EXPECT_TRUE(m_->JobOver(&reason));
  EXPECT_EQ(reason, "all 2 workers finished");
}

}  // namespace
}  // namespace dtrain::scheduler
