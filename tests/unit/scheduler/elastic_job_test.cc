#include "services/scheduler/elastic_job.h"

#include <fstream>
#include <memory>
#include <vector>

#include "common/elastic/membership_file.h"
#include "common/elastic/membership_proto.h"
#include "common/metrics/registry.h"
#include "services/scheduler/scheduler_metrics.h"
#include "tests/unit/common/metrics/exposition.h"
#include "tests/unit/common/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::scheduler {
namespace {

using elastic::MembershipGate;
using elastic::MembershipSchedule;
using ::testing::HasSubstr;
using v1::MembershipOrder;

// A parameter server as the scheduler sees it: heartbeats carrying its report, and the
// orders that come back carried out on a real MembershipGate.
struct FakeServer {
  explicit FakeServer(const MembershipSchedule& start) : gate(start) {}

  // One heartbeat: the report goes in, the answer's order is carried out.
  std::string Beat(ElasticJob& job, int rank) {
    v1::HeartbeatResponse response;
    // As MembershipOrders::Report: the generations held and the keys' versions go with
    // every report.
    report.set_min_version(min_version);
    report.set_max_version(max_version);
    report.clear_generations();
    const MembershipSchedule held = gate.schedule();  // a copy: generations() refers into it
    for (const elastic::Generation& g : held.generations()) {
      *report.add_generations() = elastic::GenerationToProto(g);
    }
    const std::string failure = job.OnServerHeartbeat(rank, 1, reported ? &report : nullptr, &response);
    if (response.has_membership_order()) CarryOut(response.membership_order());
    return failure;
  }
  void CarryOut(const MembershipOrder& order) {
    ++orders;
    reported = true;
    report.Clear();
    report.set_highest_step(-1);
    report.set_committed_from(-1);
    report.set_generation(order.generation());
    report.set_phase(order.phase());
    report.set_min_version(min_version);
    report.set_max_version(max_version);
    if (order.phase() == MembershipOrder::PHASE_PROPOSE) {
      auto p = gate.Propose(order.generation(), order.not_before());
      if (!p.ok()) return report.set_error(std::string(p.status().message()));
      report.set_highest_step(p->highest_step);
      report.set_committed_from(p->committed_from);
      return;
    }
    if (order.phase() == MembershipOrder::PHASE_ABORT) {
      if (absl::Status s = gate.Abort(order.generation()); !s.ok()) report.set_error(std::string(s.message()));
      return;
    }
    auto next = elastic::GenerationFromProto(order.next(), 4);
    dropped = dropped || order.drop_pending();
    absl::Status s = next.status();
    if (next.ok()) {
      s = order.drop_pending() ? gate.CommitDroppingStep(order.generation(), *next, [] { return absl::OkStatus(); })
                               : gate.Commit(order.generation(), *next);
    }
    if (!s.ok()) return report.set_error(std::string(s.message()));
    report.set_committed_from(next->from_step);
  }

  MembershipGate gate;
  v1::MembershipReport report;
  int64_t min_version = 0;
  int64_t max_version = 0;
  int orders = 0;
  bool dropped = false;
  // An elastic server reports on every heartbeat, its first too (phase unspecified).
  bool reported = true;
};

class ElasticJobTest : public ::testing::Test {
 protected:
  ElasticJobTest() { registry_.SetRank(0); }
  std::unique_ptr<ElasticJob> Make(int n, int min, int max, int servers, std::string replay = "") {
    ElasticJobOptions o;
    o.spec.min_workers = min;
    o.spec.max_workers = max;
    o.spec.replay_membership = std::move(replay);
    o.num_workers = n;
    o.num_servers = servers;
    o.rejoin_timeout = absl::Seconds(30);
    o.membership_file = file_;
    o.clock = [this] { return now_; };
    o.rollback = rollback_;
    o.metrics = &metrics_;
    auto job = ElasticJob::Create(std::move(o));
    EXPECT_TRUE(job.ok()) << job.status();
    std::vector<int> ranks;
    for (int r = 0; r < n; ++r) ranks.push_back(r);
    const MembershipSchedule start = *MembershipSchedule::Create(min, max, {{0, ranks}});
    for (int i = 0; i < servers; ++i) servers_.push_back(std::make_unique<FakeServer>(start));
    return job.ok() ? *std::move(job) : nullptr;
  }
  // Heartbeat rounds of every server until nothing is ordered any more.
  std::string Rounds(ElasticJob& job, int rounds) {
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < servers_.size(); ++i) {
        if (std::string failure = servers_[i]->Beat(job, static_cast<int>(i)); !failure.empty()) return failure;
      }
    }
    return "";
  }

  testing::TempDir dir_;  // removed with the test
  const std::string file_ = dir_.File("membership.json");
  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::vector<std::unique_ptr<FakeServer>> servers_;
  RollbackCoordinator* rollback_ = nullptr;
  metrics::MetricsRegistry registry_{"scheduler"};
  SchedulerMetrics metrics_{registry_};
  // The dtrain_workers gauge as exported.
  double WorkersGauge() {
    auto e = ::dtrain::testing::ParseExposition(registry_.Render());
    if (!e.ok()) return -1;
    auto found = e->Find("dtrain_workers", {});
    return found.size() == 1 ? found[0].value : -1;
  }
};

TEST_F(ElasticJobTest, AJoinIsCommittedOnEveryServerBeforeTheWorkersHearOfIt) {
  auto job = Make(2, 2, 4, 2);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->SpecText(), "2:4");
  EXPECT_EQ(job->State().generations_size(), 1);
  EXPECT_EQ(job->State().workers_at_start(), 2);
  EXPECT_EQ(WorkersGauge(), 2);
  EXPECT_TRUE((*elastic::ReadMembershipFile(file_)) == *MembershipSchedule::Create(2, 4, {{0, {0, 1}}}));
  ASSERT_TRUE(servers_[0]->gate.AdmitPush(179, 0).ok());
  EXPECT_EQ(*job->Join(-1), 2);
  EXPECT_TRUE(job->InJob(2));
  EXPECT_EQ(job->Workers(), (std::vector<int>{0, 1}));  // not before the commit
  EXPECT_EQ(Rounds(*job, 1), "");                       // the proposals go out
  EXPECT_EQ(job->State().generations_size(), 1);
  EXPECT_EQ(Rounds(*job, 3), "");
  const v1::MembershipState state = job->State();
  ASSERT_EQ(state.generations_size(), 2);
  EXPECT_EQ(state.generations(1).from_step(), 180);
  EXPECT_EQ(job->Workers(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(WorkersGauge(), 3);
  for (auto& s : servers_) EXPECT_EQ(s->gate.schedule().generations().size(), 2u);
  const auto written = elastic::ReadMembershipFile(file_);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->latest().from_step, 180);
  // Once answered, no order goes out again.
  const int orders = servers_[0]->orders;
  EXPECT_EQ(Rounds(*job, 2), "");
  EXPECT_EQ(servers_[0]->orders, orders);
}

TEST_F(ElasticJobTest, ALeaveBelowMinIsRefusedNamingIt) {
  auto job = Make(3, 2, 4, 1);
  ASSERT_TRUE(job->Leave(2).ok());
  ASSERT_TRUE(job->Leave(2).ok());  // a repeated notice
  const absl::Status refused = job->Leave(1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(),
              HasSubstr("worker 1 may not leave: only 1 worker would remain, below --elastic 2:4's MIN 2"));
  EXPECT_EQ(job->Leave(3).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Rounds(*job, 3), "");
  EXPECT_EQ(job->Workers(), (std::vector<int>{0, 1}));
  EXPECT_FALSE(job->InJob(2));
}

TEST_F(ElasticJobTest, ADeadWorkerIsDroppedFromTheVersionEveryKeyIsAt) {
  auto job = Make(3, 2, 4, 2);
  // Nothing of step 812 merged anywhere. (How a server drops the pushes pending for it
  // is the server's; this gate only checks the schedule.)
  for (auto& s : servers_) s->min_version = s->max_version = 812;
  job->Drop(1, "heartbeat stream broke");
  job->Drop(3, "not in the job");  // ignored
  EXPECT_EQ(Rounds(*job, 4), "");
  const v1::MembershipState state = job->State();
  ASSERT_EQ(state.generations_size(), 2);
  EXPECT_EQ(state.generations(1).from_step(), 812);
  EXPECT_EQ(job->Workers(), (std::vector<int>{0, 2}));
  for (auto& s : servers_) EXPECT_TRUE(s->dropped);
}

// Worker 2 joins from step 180 and fails before its first step (another model): the
// survivors' pushes of step 180 wait for it on every key, and it is removed at once,
// generation 1 replaced from step 180.
TEST_F(ElasticJobTest, AJoinerThatFailedBeforeItsFirstStepIsRemovedFromItsJoinStep) {
  auto job = Make(2, 2, 4, 2);
  for (auto& s : servers_) ASSERT_TRUE(s->gate.AdmitPush(179, 0).ok());
  ASSERT_EQ(*job->Join(-1), 2);
  EXPECT_EQ(Rounds(*job, 4), "");
  ASSERT_EQ(job->Workers(), (std::vector<int>{0, 1, 2}));
  for (auto& s : servers_) {
    ASSERT_TRUE(s->gate.AdmitPush(180, 1).ok());
    s->min_version = s->max_version = 180;
  }
  EXPECT_FALSE(job->RemoveFailedJoiner(0, "a worker that was there from the start"));
  // Step 179 still merging on server 0 (its last push admitted before the commit): the
  // removal waits for it rather than take the keys for a step merged by the joiner.
  servers_[0]->min_version = 179;
  EXPECT_TRUE(job->RemoveFailedJoiner(2, "this worker's model is not the job's"));
  EXPECT_EQ(Rounds(*job, 4), "");
  EXPECT_EQ(job->State().generations_size(), 2);
  servers_[0]->min_version = 180;
  EXPECT_EQ(Rounds(*job, 4), "");
  const v1::MembershipState state = job->State();
  ASSERT_EQ(state.generations_size(), 3);
  EXPECT_EQ(state.generations(2).from_step(), 180);
  EXPECT_EQ(job->Workers(), (std::vector<int>{0, 1}));
  EXPECT_FALSE(job->InJob(2));
  EXPECT_EQ(WorkersGauge(), 2);
  for (auto& s : servers_) {
    EXPECT_TRUE(s->dropped);
    EXPECT_EQ(s->gate.schedule().generations().size(), 3u);
  }
  EXPECT_EQ(elastic::ReadMembershipFile(file_)->generations().size(), 3u);
}

// Its generation merged step 180 (every key at 181): the joiner did step, and its
// failure is the job's, naming it.
TEST_F(ElasticJobTest, AFailedJoinerWhoseGenerationMergedAStepFailsTheJob) {
  auto job = Make(2, 2, 4, 1);
  ASSERT_EQ(*job->Join(-1), 2);
  EXPECT_EQ(Rounds(*job, 4), "");
  ASSERT_EQ(job->Workers(), (std::vector<int>{0, 1, 2}));
  servers_[0]->min_version = servers_[0]->max_version = 5;
  ASSERT_TRUE(job->RemoveFailedJoiner(2, "out of memory"));
  EXPECT_THAT(Rounds(*job, 3),
              HasSubstr("worker 2 failed: out of memory (its generation from step 1 merged a step already"));
}

// Dropped as dead first (its stream broke before its Leave came): its failure still
// counts, so a generation that merged a step fails the job naming it.
TEST_F(ElasticJobTest, AFailedJoinerDroppedAsDeadAlreadyIsRemovedOnlyIfItNeverStepped) {
  auto job = Make(2, 2, 4, 1);
  ASSERT_EQ(*job->Join(-1), 2);
  EXPECT_EQ(Rounds(*job, 4), "");
  job->Drop(2, "heartbeat stream broke");
  EXPECT_TRUE(job->RemoveFailedJoiner(2, "out of memory"));
  servers_[0]->min_version = servers_[0]->max_version = 5;
  EXPECT_THAT(Rounds(*job, 3), HasSubstr("worker 2 failed: out of memory"));
}

// It failed before its join was committed: the join is withdrawn, nothing is proposed.
TEST_F(ElasticJobTest, AJoinerThatFailedBeforeItsCommitIsWithdrawn) {
  auto job = Make(2, 2, 4, 1);
  ASSERT_EQ(*job->Join(-1), 2);
  EXPECT_TRUE(job->RemoveFailedJoiner(2, "cannot reach server 0"));
  EXPECT_FALSE(job->InJob(2));
  EXPECT_EQ(Rounds(*job, 3), "");
  EXPECT_EQ(job->State().generations_size(), 1);
  EXPECT_EQ(servers_[0]->orders, 0);
}

TEST_F(ElasticJobTest, ADeadWorkerWhoseStepMergedOnSomeKeysFailsTheJobWithoutASnapshot) {
  auto job = Make(3, 2, 4, 2);
  servers_[0]->min_version = 812;
  servers_[0]->max_version = 813;
  servers_[1]->min_version = servers_[1]->max_version = 812;
  job->Drop(1, "heartbeat stream broke");
  const std::string failure = Rounds(*job, 3);
  EXPECT_THAT(failure, HasSubstr("worker 1 died in step 812 after some keys merged it (versions 812..813)"));
}

TEST_F(ElasticJobTest, ADeadWorkerWhoseStepMergedOnSomeKeysIsRemovedFromTheCommonSnapshotAfterTheRollback) {
  RollbackCoordinator rollback(2, absl::Seconds(60));
  rollback_ = &rollback;
  auto job = Make(3, 2, 4, 2);
  servers_[0]->min_version = 812;
  servers_[0]->max_version = 813;
  servers_[1]->min_version = servers_[1]->max_version = 812;
  v1::SnapshotReport snapshots;
  snapshots.set_listed(true);
  for (int64_t step : {800, 700}) snapshots.add_complete_steps(step);
  for (int rank : {0, 1}) rollback.OnServerHeartbeat(rank, 1, snapshots, 812, now_);
  job->Drop(1, "heartbeat stream broke");
  EXPECT_EQ(Rounds(*job, 4), "");
  EXPECT_EQ(job->State().generations_size(), 1);  // the servers reload first
  ASSERT_EQ(rollback.rollbacks(), 1);
  EXPECT_THAT(rollback.last_rollback(), HasSubstr("rolled back to step 800: worker 1 died"));
  snapshots.set_rollback_done(1);
  for (int rank : {0, 1}) rollback.OnServerHeartbeat(rank, 1, snapshots, 812, now_);
  EXPECT_EQ(Rounds(*job, 4), "");
  ASSERT_EQ(job->State().generations_size(), 2);
  EXPECT_EQ(job->State().generations(1).from_step(), 800);
  EXPECT_EQ(job->Workers(), (std::vector<int>{0, 2}));
  for (auto& s : servers_) EXPECT_FALSE(s->dropped);
  EXPECT_EQ(rollback.rollbacks(), 1);
}

TEST_F(ElasticJobTest, BelowMinTheJobWaitsTheRejoinTimeoutForAJoinerThenFailsNamingWhoIsMissing) {
  auto job = Make(2, 2, 4, 1);
  job->Drop(1, "no heartbeat for 10.0 s");
  EXPECT_EQ(job->Advance(), "");
  now_ += absl::Seconds(20);
  EXPECT_EQ(job->Advance(), "");
  now_ += absl::Seconds(11);
  EXPECT_THAT(job->Advance(), HasSubstr("worker 1 died (no heartbeat for 10.0 s) and only 1 worker would remain, "
                                        "below --elastic 2:4's MIN 2; no worker joined within the rejoin timeout"));
  // A joiner in time instead: the dead worker goes and the joiner comes in one change.
  servers_.clear();
  auto other = Make(2, 2, 4, 1);
  servers_[0]->min_version = servers_[0]->max_version = 5;
  other->Drop(1, "no heartbeat for 10.0 s");
  EXPECT_EQ(other->Advance(), "");
  EXPECT_EQ(*other->Join(-1), 2);
  EXPECT_EQ(Rounds(*other, 4), "");
  EXPECT_EQ(other->Workers(), (std::vector<int>{0, 2}));
  EXPECT_EQ(other->State().generations(1).from_step(), 5);
}

TEST_F(ElasticJobTest, AReplayHoldsTheJoinerUntilItsRecordedStep) {
  const std::string recorded = dir_.File("recorded.json");
  ASSERT_TRUE(
      elastic::WriteMembershipFile(recorded, *MembershipSchedule::Create(2, 4, {{0, {0, 1}}, {50, {0, 1, 3}}})).ok());
  auto job = Make(2, 2, 4, 1, recorded);
  EXPECT_EQ(*job->Join(-1), 3);
  EXPECT_EQ(Rounds(*job, 4), "");
  ASSERT_EQ(job->State().generations_size(), 2);
  EXPECT_EQ(job->State().generations(1).from_step(), 50);
}

TEST_F(ElasticJobTest, AReplayFileThatDoesNotParseIsRefusedNamingTheFileAndTheLine) {
  const std::string bad = dir_.File("bad.json");
  std::ofstream(bad) << "{\"format\": \"dtrain-membership-1\",\n \"min_workers\": 2,,\n}\n";
  ElasticJobOptions o;
  o.spec.min_workers = 2;
  o.spec.max_workers = 4;
  o.spec.replay_membership = bad;
  o.num_workers = 2;
  const auto job = ElasticJob::Create(o);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr(bad));
  EXPECT_THAT(job.status().message(), HasSubstr("line 2"));
}

// --resume-membership: the job starts with the checkpoint's schedule, its past included
// (what the servers and workers get), and the lr factor stays relative to its first
// generation; a start with another worker count, or under bounds it breaks, is refused.
TEST_F(ElasticJobTest, AResumedJobStartsWithTheCheckpointsMembership) {
  const std::string saved = dir_.File("m-0001.membership.json");
  const MembershipSchedule resumed = *MembershipSchedule::Create(2, 4, {{0, {0, 1, 2}}, {5, {0, 2}}, {20, {0, 1}}});
  ASSERT_TRUE(elastic::WriteMembershipFile(saved, resumed).ok());
  ElasticJobOptions o;
  o.spec.min_workers = 2;
  o.spec.max_workers = 4;
  o.spec.resume_membership = saved;
  o.num_workers = 2;
  o.num_servers = 1;
  const auto job = ElasticJob::Create(o);
  ASSERT_TRUE(job.ok()) << job.status();
  const v1::MembershipState state = (*job)->State();
  EXPECT_EQ(state.generations_size(), 3);
  EXPECT_EQ(state.workers_at_start(), 3);
  EXPECT_EQ((*job)->Workers(), (std::vector<int>{0, 1}));

  o.num_workers = 3;
  const auto three = ElasticJob::Create(o);
  EXPECT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(three.status().message(), HasSubstr("the checkpoint resumes with 2 workers"));
  EXPECT_THAT(three.status().message(), HasSubstr("start it with -n 2"));
  o.num_workers = 2;
  o.spec.max_workers = 2;  // {0,1,2} once: not a job of 2:2
  const auto bounds = ElasticJob::Create(o);
  EXPECT_EQ(bounds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bounds.status().message(), HasSubstr("under --elastic 2:2"));
}

TEST(CheckNodeElasticTest, ANodeMustRunTheJobsBounds) {
  EXPECT_TRUE(CheckNodeElastic("", nullptr, "worker").ok());
  EXPECT_THAT(CheckNodeElastic("2:4", nullptr, "worker").message(),
              HasSubstr("worker was started with --elastic 2:4, but the job runs without --elastic"));
  ElasticJobOptions o;
  o.spec.min_workers = 2;
  o.spec.max_workers = 4;
  o.num_workers = 2;
  const auto job = *ElasticJob::Create(o);
  EXPECT_TRUE(CheckNodeElastic("2:4", job.get(), "worker").ok());
  EXPECT_TRUE(CheckNodeElastic("02:4", job.get(), "worker").ok());
  EXPECT_EQ(CheckNodeElastic("2:5", job.get(), "server").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(CheckNodeElastic("", job.get(), "server").message(),
              HasSubstr("server was started without --elastic, but the job runs with --elastic 2:4"));
}

// A scheduler that died between proposing and committing: its successor finds the
// servers holding a proposal no server committed, and with no change of its own pending
// it aborts them, so the held pushes go on.
TEST_F(ElasticJobTest, ARestartedSchedulerAbortsAProposalNoServerCommitted) {
  auto job = Make(2, 2, 4, 2);
  for (auto& server : servers_) {
    ASSERT_TRUE(server->gate.AdmitPush(9, 0).ok());
    MembershipOrder propose;
    propose.set_phase(MembershipOrder::PHASE_PROPOSE);
    propose.set_generation(1);
    server->CarryOut(propose);  // what the scheduler before asked
    ASSERT_EQ(server->gate.AdmitPush(10, 0).code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(Rounds(*job, 3), "");
  for (auto& server : servers_) {
    EXPECT_TRUE(server->gate.AdmitPush(10, 0).ok());
    EXPECT_EQ(server->report.phase(), MembershipOrder::PHASE_ABORT);
  }
  EXPECT_EQ(job->State().generations_size(), 1);
}

}  // namespace
}  // namespace dtrain::scheduler
