#include "services/scheduler/membership.h"

#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace dtrain::scheduler {
namespace {

// A clock the test moves by hand.
struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1000);
  Clock fn() {
    return [this] { return now; };
  }
};

Registration Req(Role role, int rank, int workers = 0, int servers = 0) {
  Registration r;
  r.role = role;
  r.requested_rank = rank;
  r.pid = 4242;
  r.hostname = "host-a";
  r.num_workers = workers;
  r.num_servers = servers;
  r.address = "10.0.0.1:" + std::to_string(9000 + rank);
  return r;
}

class MembershipTest : public ::testing::Test {
 protected:
  Membership Make(int workers, int servers) {
    MembershipOptions o;
    o.num_workers = workers;
    o.num_servers = servers;
    o.heartbeat_timeout = absl::Seconds(10);
    o.clock = clock_.fn();
    return Membership(o);
  }
  FakeClock clock_;
};

TEST_F(MembershipTest, AssignsLowestFreeRankAndHonoursRequests) {
  MembershipOptions o;
  o.num_workers = 3;
  o.num_servers = 2;
  Membership m(o);
  EXPECT_EQ(*m.Register(Req(Role::kWorker, 1)), 1);
  EXPECT_EQ(*m.Register(Req(Role::kWorker, -1)), 0);
  EXPECT_EQ(*m.Register(Req(Role::kWorker, -1)), 2);
  EXPECT_EQ(*m.Register(Req(Role::kServer, 1)), 1);
  EXPECT_FALSE(m.AllRegistered());
  EXPECT_EQ(*m.Register(Req(Role::kServer, -1)), 0);
  EXPECT_TRUE(m.AllRegistered());
  ClusterShape view = m.View();
  ASSERT_EQ(view.servers.size(), 2u);
  EXPECT_EQ(view.servers[0].rank, 0);
  EXPECT_EQ(view.servers[1].rank, 1);
  EXPECT_EQ(view.servers[1].address, "10.0.0.1:9001");
  EXPECT_EQ(view.num_workers, 3);
  EXPECT_EQ(view.kv_store, KVStoreMode::kDistSync);
}

TEST_F(MembershipTest, RefusesConflictsAndBadRequests) {
  MembershipOptions o;
  o.num_workers = 2;
  o.num_servers = 1;
  Membership m(o);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  auto dup = m.Register(Req(Role::kWorker, 0));
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(dup.status().message().find("worker rank 0 is already held by pid 4242"), absl::string_view::npos);
  EXPECT_EQ(m.Register(Req(Role::kWorker, 2)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Register(Req(Role::kScheduler, -1)).status().code(), absl::StatusCode::kInvalidArgument);
  auto mismatch = m.Register(Req(Role::kWorker, -1, /*workers=*/3, /*servers=*/1));
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("3 workers"), absl::string_view::npos);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, -1, 2, 1)).ok());
  EXPECT_EQ(m.Register(Req(Role::kWorker, -1)).status().code(), absl::StatusCode::kResourceExhausted);
}

// Replication (docs/recovery.md): a node started with another --replication is
// refused like a size mismatch; 0 (not said) passes; the view carries the job's.
TEST_F(MembershipTest, RefusesAnotherReplicationAndTellsIt) {
  MembershipOptions o;
  o.num_workers = 1;
  o.num_servers = 3;
  o.replication = 2;
  Membership m(o);
  Registration other = Req(Role::kServer, 0);
  other.replication = 1;
  auto refused = m.Register(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("server was started with --replication 1, but the job has --replication 2"),
            absl::string_view::npos)
      << refused.status().message();
  Registration same = Req(Role::kServer, 0);
  same.replication = 2;
  EXPECT_TRUE(m.Register(same).ok());
  EXPECT_TRUE(m.Register(Req(Role::kServer, 1)).ok());  // not said
  EXPECT_EQ(m.View().replication, 2);
}

TEST_F(MembershipTest, DeadRankMayRegisterAgain) {
  Membership m = Make(2, 0);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 1)).ok());
  uint64_t inc = 0;
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 1}, &inc, 5, 10.0).ok());
  EXPECT_TRUE(m.StreamClosed({Role::kWorker, 1}, inc, "heartbeat stream broke"));
  EXPECT_NE(m.Describe({Role::kWorker, 1}).find("DEAD"), std::string::npos);
  size_t cursor = 0;
  ASSERT_EQ(m.DeathsSince(&cursor).size(), 1u);
  // The old process is refused; a restart takes the rank (requested or assigned).
  EXPECT_EQ(m.Heartbeat({Role::kWorker, 1}, &inc, 6, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*m.Register(Req(Role::kWorker, -1)), 1);
  uint64_t fresh = 0;
  EXPECT_TRUE(m.Heartbeat({Role::kWorker, 1}, &fresh, 0, 0).ok());
  // The stale stream closing does not kill the new incarnation.
  EXPECT_FALSE(m.StreamClosed({Role::kWorker, 1}, inc, "late"));
  EXPECT_EQ(m.Heartbeat({Role::kWorker, 1}, &inc, 7, 1).code(), absl::StatusCode::kFailedPrecondition);
  cursor = 0;
  EXPECT_TRUE(m.DeathsSince(&cursor).empty());  // alive again: no longer reported
}

TEST_F(MembershipTest, SilentNodesDieAfterTimeoutOnlyOnceRegistrationCompletes) {
  Membership m = Make(2, 1);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  ASSERT_TRUE(m.Register(Req(Role::kServer, 0)).ok());
  clock_.now += absl::Seconds(60);  // still waiting for worker 1: nobody is swept
  EXPECT_TRUE(m.SweepSilent().empty());
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 1)).ok());
  uint64_t i0 = 0, i1 = 0;
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 0}, &i0, 1, 1).ok());
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 1}, &i1, 1, 1).ok());
  clock_.now += absl::Seconds(6);
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 0}, &i0, 2, 1).ok());
  clock_.now += absl::Seconds(6);
  auto dead = m.SweepSilent();
  ASSERT_EQ(dead.size(), 2u);  // worker 1 and the server that never heartbeat; worker 0 spoke 6 s ago
  EXPECT_EQ(dead[0].role, Role::kServer);
  EXPECT_EQ(dead[1].rank, 1);
  EXPECT_NE(m.Describe({Role::kWorker, 1}).find("no heartbeat for 12.0 s"), std::string::npos);
  EXPECT_NE(m.Describe({Role::kWorker, 0}).find("last heard 6.0 s ago, at step 2"), std::string::npos);
}

TEST_F(MembershipTest, RegistrationTextNamesMissing) {
  Membership m = Make(2, 2);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  ASSERT_TRUE(m.Register(Req(Role::kServer, 0)).ok());
  ASSERT_TRUE(m.Register(Req(Role::kServer, 1)).ok());
  clock_.now += absl::Seconds(30);
  EXPECT_EQ(m.RegistrationText(), "registration: 1 of 2 workers, 2 of 2 servers after 30 s; missing worker rank 1");
  Membership m2 = Make(3, 2);
  EXPECT_EQ(m2.RegistrationText(),
            "registration: 0 of 3 workers, 0 of 2 servers after 0 s; missing worker ranks 0, 1, 2; server ranks 0, 1");
}

TEST_F(MembershipTest, AwaitReleasesEveryoneOrWithdrawsOnDeadline) {
  MembershipOptions o;
  o.num_workers = 2;
  o.num_servers = 0;
  Membership m(o);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  absl::Status timed_out = m.AwaitAllRegistered({Role::kWorker, 0}, absl::Now() + absl::Milliseconds(100), nullptr);
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(timed_out.message().find("1 of 2 workers"), absl::string_view::npos) << timed_out;
  EXPECT_NE(timed_out.message().find("missing worker rank 1"), absl::string_view::npos) << timed_out;
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());  // withdrawn: its rank is free again
  absl::Status waited;
  std::thread t([&] { waited = m.AwaitAllRegistered({Role::kWorker, 0}, absl::Now() + absl::Seconds(10), nullptr); });
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(m.Register(Req(Role::kWorker, -1)).ok());
  t.join();
  EXPECT_TRUE(waited.ok()) << waited;
}

TEST_F(MembershipTest, CancelledWaitFreesRankAndCloseWakes) {
  MembershipOptions o;
  o.num_workers = 2;
  o.num_servers = 0;
  Membership m(o);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 1)).ok());
  EXPECT_EQ(m.AwaitAllRegistered({Role::kWorker, 1}, absl::InfiniteFuture(), [] { return true; }).code(),
            absl::StatusCode::kCancelled);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 1)).ok());
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    m.Close();
  });
  EXPECT_EQ(m.AwaitAllRegistered({Role::kWorker, 1}, absl::InfiniteFuture(), nullptr).code(),
            absl::StatusCode::kUnavailable);
  closer.join();
}

TEST_F(MembershipTest, JobOverWhenAllWorkersLeaveOrOneFails) {
  Membership m = Make(2, 1);
  for (auto [role, rank] : {std::pair{Role::kWorker, 0}, {Role::kWorker, 1}, {Role::kServer, 0}}) {
    ASSERT_TRUE(m.Register(Req(role, rank)).ok());
  }
  std::string reason;
  ASSERT_TRUE(m.Leave({Role::kWorker, 0}, false, "").ok());
  EXPECT_FALSE(m.JobOver(&reason));
  ASSERT_TRUE(m.Leave({Role::kWorker, 1}, false, "").ok());
  EXPECT_TRUE(m.JobOver(&reason));
  EXPECT_EQ(reason, "all 2 workers finished");
  EXPECT_FALSE(m.AllGone());
  uint64_t inc = 0;
  ASSERT_TRUE(m.Heartbeat({Role::kServer, 0}, &inc, 0, 0).ok());
  EXPECT_TRUE(m.StreamClosed({Role::kServer, 0}, inc, "broke"));
  EXPECT_TRUE(m.AllGone());
  EXPECT_TRUE(m.Failure().empty());
  EXPECT_EQ(m.Leave({Role::kWorker, 5}, false, "").code(), absl::StatusCode::kNotFound);

  Membership f = Make(2, 0);
  ASSERT_TRUE(f.Register(Req(Role::kWorker, 0)).ok());
  ASSERT_TRUE(f.Leave({Role::kWorker, 0}, true, "out of memory").ok());
  EXPECT_TRUE(f.JobOver(&reason));
  EXPECT_EQ(reason, "worker 0 failed: out of memory");
}

TEST_F(MembershipTest, LeftNodeIsNotDeadWhenItsStreamCloses) {
  Membership m = Make(1, 0);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  uint64_t inc = 0;
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 0}, &inc, 0, 0).ok());
  ASSERT_TRUE(m.Leave({Role::kWorker, 0}, false, "").ok());
  EXPECT_FALSE(m.StreamClosed({Role::kWorker, 0}, inc, "closed"));
  EXPECT_EQ(m.Nodes()[0].state, NodeState::kFinished);
}

// DMLC_WORKER_ID=1 started first, then a worker with no ID, then DMLC_WORKER_ID=0:
// the requests win whatever the order, and the unrequested node fills what is left.
TEST_F(MembershipTest, RequestedRanksWinOverEarlierUnrequestedNodes) {
  Membership m = Make(3, 0);
  uint64_t t_free = 0, t_one = 0, t_zero = 0;
  ASSERT_EQ(*m.Register(Req(Role::kWorker, -1), &t_free), 0);  // provisional
  ASSERT_EQ(*m.Register(Req(Role::kWorker, 1), &t_one), 1);
  ASSERT_EQ(*m.Register(Req(Role::kWorker, 0), &t_zero), 0);  // moves the provisional node
  ASSERT_TRUE(m.AllRegistered());
  EXPECT_EQ(*m.AwaitAllRegistered(t_zero, absl::InfiniteFuture(), nullptr), 0);
  EXPECT_EQ(*m.AwaitAllRegistered(t_one, absl::InfiniteFuture(), nullptr), 1);
  EXPECT_EQ(*m.AwaitAllRegistered(t_free, absl::InfiniteFuture(), nullptr), 2);
}

TEST_F(MembershipTest, DuplicateAndOutOfRangeRequestsAreRefusedClearly) {
  Membership m = Make(2, 0);
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 1)).ok());
  auto dup = m.Register(Req(Role::kWorker, 1));
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(dup.status().message().find("worker rank 1 is already held by pid 4242"), std::string::npos)
      << dup.status();
  auto out = m.Register(Req(Role::kWorker, 2));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("ranks 0..1"), std::string::npos) << out.status();
}

// Every worker gone and one of them dead: the job failed (servers must not wait forever).
TEST_F(MembershipTest, AllWorkersGoneAfterADeathFailsTheJob) {
  Membership m = Make(2, 1);
  uint64_t inc0 = 0, inc1 = 0;
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 1)).ok());
  ASSERT_TRUE(m.Register(Req(Role::kServer, 0)).ok());
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 0}, &inc0, 1, 0).ok());
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 1}, &inc1, 1, 0).ok());
  ASSERT_TRUE(m.StreamClosed({Role::kWorker, 1}, inc1, "heartbeat stream broke"));
  std::string reason;
  EXPECT_FALSE(m.JobOver(&reason));  // worker 0 may still finish
  ASSERT_TRUE(m.Leave({Role::kWorker, 0}, false, "").ok());
  ASSERT_TRUE(m.JobOver(&reason));
  EXPECT_NE(reason.find("worker 1 died (heartbeat stream broke)"), std::string::npos) << reason;
  EXPECT_EQ(m.Failure(), reason);
}

// Recovery (docs/recovery.md): incarnations, fencing, job ids, DEAD that is not final.

Registration Rejoin(Role role, int rank, uint64_t incarnation, const std::string& job = "") {
  Registration r = Req(role, rank);
  r.incarnation = incarnation;
  r.job_id = job;
  r.pid = 5000 + static_cast<int>(incarnation);
  return r;
}

class RecoveryTest : public MembershipTest {
 protected:
  Membership MakeWithRejoin(int workers, int servers, absl::Duration rejoin_timeout, std::string job = "") {
    MembershipOptions o;
    o.num_workers = workers;
    o.num_servers = servers;
    o.heartbeat_timeout = absl::Seconds(10);
    o.rejoin_timeout = rejoin_timeout;
    o.job_id = std::move(job);
    o.clock = clock_.fn();
    return Membership(o);
  }
  Membership::Admission Admit(Membership& m, const Registration& r) {
    uint64_t ticket = 0;
    auto rank = m.Register(r, &ticket);
    EXPECT_TRUE(rank.ok()) << rank.status();
    // Await only once the job is complete (it would block for the others before).
    if (m.AllRegistered()) EXPECT_TRUE(m.AwaitAllRegistered(ticket, absl::Now() + absl::Seconds(5), nullptr).ok());
    auto a = m.Admitted(ticket);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : Membership::Admission();
  }
};

TEST_F(RecoveryTest, ReplacementOfADeadWorkerIsANewIncarnationAndFencesTheOld) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  EXPECT_EQ(Admit(m, Req(Role::kServer, 0)).node.incarnation, 1u);
  EXPECT_EQ(Admit(m, Req(Role::kWorker, 0)).node.incarnation, 1u);
  Membership::Admission first = Admit(m, Req(Role::kWorker, 1));
  EXPECT_EQ(first.node.incarnation, 1u);
  EXPECT_FALSE(first.rejoined);  // worker 1's start-up registration completed the job
  const NodeKey w1{Role::kWorker, 1};
  uint64_t old_inc = 0;
  ASSERT_TRUE(m.Heartbeat(w1, &old_inc, 7, 1).ok());
  ASSERT_TRUE(m.StreamClosed(w1, old_inc, "heartbeat stream broke"));
  EXPECT_TRUE(m.MayRejoin(w1));

  Membership::Admission again = Admit(m, Req(Role::kWorker, 1));
  EXPECT_TRUE(again.rejoined);
  EXPECT_EQ(again.node.incarnation, 2u);
  EXPECT_EQ(again.node.restarts, 1);
  EXPECT_EQ(again.replaced_incarnation, 1u);
  EXPECT_EQ(again.node.state, NodeState::kRejoining);
  EXPECT_NE(m.Describe(w1).find("rejoining (incarnation 2)"), std::string::npos) << m.Describe(w1);

  // Every request of the old process is refused, saying why.
  absl::Status hb = m.Heartbeat(w1, &old_inc, 8, 1);
  EXPECT_EQ(hb.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(hb.message().find("fenced: worker 1 incarnation 1 replaced by 2 (pid 4242 on host-a)"),
            absl::string_view::npos)
      << hb;
  absl::Status call = m.CheckCaller(w1, "", 1);
  EXPECT_EQ(call.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(call.message().find("incarnation 1 replaced by 2"), absl::string_view::npos) << call;
  EXPECT_TRUE(m.CheckCaller(w1, "", 2).ok());
  EXPECT_TRUE(m.CheckCaller(w1, "", 0).ok());  // an older client that does not say
  EXPECT_FALSE(m.StreamClosed(w1, 1, "the stale stream ends"));

  // The new one resumes: REJOINING while it catches up, then ALIVE.
  uint64_t new_inc = 2;
  ASSERT_TRUE(m.Heartbeat(w1, &new_inc, 7, 0, /*resuming=*/true).ok());
  EXPECT_EQ(m.Find(w1)->state, NodeState::kRejoining);
  ASSERT_TRUE(m.Heartbeat(w1, &new_inc, 8, 1).ok());
  EXPECT_EQ(m.Find(w1)->state, NodeState::kAlive);
  EXPECT_EQ(m.Find(w1)->restarts, 1);

  // Others hear of the death (with when and why) and of the comeback.
  size_t deaths = 0, rejoins = 0;
  EXPECT_TRUE(m.DeathsSince(&deaths).empty());  // alive again
  std::vector<NodeRecord> back = m.RejoinsSince(&rejoins);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].rank, 1);
  EXPECT_EQ(back[0].incarnation, 2u);
  std::string reason;
  EXPECT_FALSE(m.JobOver(&reason)) << reason;
}

TEST_F(RecoveryTest, DeadNodeInfoSaysSinceWhenAndWhy) {
  Membership m = MakeWithRejoin(2, 0, absl::Seconds(60));
  Admit(m, Req(Role::kWorker, 0));
  Admit(m, Req(Role::kWorker, 1));
  uint64_t inc = 0;
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 1}, &inc, 3, 1).ok());
  const absl::Time died = clock_.now;
  ASSERT_TRUE(m.StreamClosed({Role::kWorker, 1}, inc, "heartbeat stream broke"));
  clock_.now += absl::Seconds(12);
  size_t cursor = 0;
  std::vector<NodeRecord> dead = m.DeathsSince(&cursor);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].dead_since_unix_ms, absl::ToUnixMillis(died));
  EXPECT_EQ(dead[0].death_reason, "heartbeat stream broke");
  EXPECT_NE(m.Describe({Role::kWorker, 1}).find("DEAD for 12.0 s"), std::string::npos);
}

TEST_F(RecoveryTest, PausedWorkerThatComesBackBeforeAReplacementResumes) {
  Membership m = MakeWithRejoin(2, 0, absl::Seconds(60));
  Admit(m, Req(Role::kWorker, 0));
  Admit(m, Req(Role::kWorker, 1));
  const NodeKey w1{Role::kWorker, 1};
  uint64_t inc = 0;
  ASSERT_TRUE(m.Heartbeat(w1, &inc, 5, 1).ok());
  clock_.now += absl::Seconds(11);  // SIGSTOP: silent, its stream still open
  uint64_t inc0 = 0;
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 0}, &inc0, 9, 1).ok());
  ASSERT_EQ(m.SweepSilent().size(), 1u);
  EXPECT_TRUE(m.MayRejoin(w1));
  clock_.now += absl::Seconds(5);  // SIGCONT
  bool revived = false;
  ASSERT_TRUE(m.Heartbeat(w1, &inc, 6, 1, false, &revived).ok());
  EXPECT_TRUE(revived);
  EXPECT_EQ(m.Find(w1)->state, NodeState::kAlive);
  EXPECT_EQ(m.Find(w1)->incarnation, 1u);
  EXPECT_EQ(m.Find(w1)->restarts, 0);
  size_t rejoins = 0;
  ASSERT_EQ(m.RejoinsSince(&rejoins).size(), 1u);
  EXPECT_TRUE(m.ExpireRejoinWaits().empty());
  clock_.now += absl::Seconds(120);  // long after the rejoin timeout: it came back in time
  uint64_t again = inc;
  ASSERT_TRUE(m.Heartbeat(w1, &again, 7, 1).ok());
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 0}, &inc0, 10, 1).ok());
  EXPECT_TRUE(m.ExpireRejoinWaits().empty());
  EXPECT_TRUE(m.Failure().empty());
}

TEST_F(RecoveryTest, WithoutARejoinTimeoutDeathStaysFinalForTheProcess) {
  Membership m = MakeWithRejoin(2, 0, absl::ZeroDuration());
  Admit(m, Req(Role::kWorker, 0));
  Admit(m, Req(Role::kWorker, 1));
  const NodeKey w1{Role::kWorker, 1};
  uint64_t inc = 0;
  ASSERT_TRUE(m.Heartbeat(w1, &inc, 5, 1).ok());
  ASSERT_TRUE(m.StreamClosed(w1, inc, "heartbeat stream broke"));
  EXPECT_FALSE(m.MayRejoin(w1));
  absl::Status s = m.Heartbeat(w1, &inc, 6, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("declared worker 1 dead"), absl::string_view::npos) << s;
  EXPECT_TRUE(m.ExpireRejoinWaits().empty());
}

TEST_F(RecoveryTest, WorkerNotBackWithinTheRejoinTimeoutFailsTheJob) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(30));
  Admit(m, Req(Role::kServer, 0));
  Admit(m, Req(Role::kWorker, 0));
  Admit(m, Req(Role::kWorker, 1));
  uint64_t inc = 0;
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 1}, &inc, 5, 1).ok());
  ASSERT_TRUE(m.StreamClosed({Role::kWorker, 1}, inc, "heartbeat stream broke"));
  ASSERT_TRUE(m.Leave({Role::kWorker, 0}, false, "").ok());
  std::string reason;
  // Worker 0 is done and worker 1 dead, but it may still come back.
  EXPECT_FALSE(m.JobOver(&reason)) << reason;
  clock_.now += absl::Seconds(29);
  EXPECT_TRUE(m.ExpireRejoinWaits().empty());
  clock_.now += absl::Seconds(2);
  std::vector<NodeRecord> expired = m.ExpireRejoinWaits();
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].rank, 1);
  EXPECT_TRUE(m.ExpireRejoinWaits().empty());  // once
  ASSERT_TRUE(m.JobOver(&reason));
  EXPECT_EQ(reason, "worker 1 died (heartbeat stream broke) and did not rejoin within 30.0 s (--rejoin-timeout)");
  // Too late to come back now.
  EXPECT_EQ(m.Heartbeat({Role::kWorker, 1}, &inc, 6, 1).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RecoveryTest, AnotherJobIsRefusedNamingBothIds) {
  Membership m = MakeWithRejoin(1, 0, absl::ZeroDuration(), "job-a");
  auto other = m.Register(Rejoin(Role::kWorker, 0, 0, "job-b"));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("belongs to job 'job-b', but this scheduler runs job 'job-a'"),
            absl::string_view::npos)
      << other.status();
  Admit(m, Rejoin(Role::kWorker, 0, 0, "job-a"));
  EXPECT_EQ(m.View().job_id, "job-a");
  EXPECT_EQ(m.CheckCaller({Role::kWorker, 0}, "job-b", 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(m.CheckCaller({Role::kWorker, 0}, "job-a", 1).ok());

  // Without --job-id: the first node's id, else one made up.
  Membership learns = MakeWithRejoin(1, 0, absl::ZeroDuration());
  Admit(learns, Rejoin(Role::kWorker, 0, 0, "job-c"));
  EXPECT_EQ(learns.JobId(), "job-c");
  Membership makes = MakeWithRejoin(1, 0, absl::ZeroDuration());
  Admit(makes, Req(Role::kWorker, 0));
  EXPECT_EQ(makes.JobId().rfind("job-", 0), 0u) << makes.JobId();
}

// A restarted scheduler: the nodes register again with their ranks and incarnations,
// keep them, and an older incarnation of a rank is fenced.
TEST_F(RecoveryTest, NodesReRegisterWithTheirIncarnationsAfterASchedulerRestart) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  Admit(m, Rejoin(Role::kServer, 0, 1, "job-a"));
  EXPECT_EQ(m.JobId(), "job-a");  // learnt from the nodes
  Admit(m, Rejoin(Role::kWorker, 0, 1, "job-a"));
  Membership::Admission w1 = Admit(m, Rejoin(Role::kWorker, 1, 3, "job-a"));
  EXPECT_TRUE(w1.rejoined);
  EXPECT_EQ(w1.node.incarnation, 3u);
  EXPECT_EQ(w1.node.state, NodeState::kRegistered);
  auto stale = m.Register(Rejoin(Role::kWorker, 1, 2, "job-a"));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.status().message().find("fenced: worker 1 incarnation 2 replaced by 3"), absl::string_view::npos)
      << stale.status();
  // A later fresh process for the rank gets a newer incarnation than any seen.
  uint64_t inc = 3;
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 1}, &inc, 1, 1).ok());
  ASSERT_TRUE(m.StreamClosed({Role::kWorker, 1}, inc, "heartbeat stream broke"));
  EXPECT_EQ(Admit(m, Rejoin(Role::kWorker, 1, 0, "job-a")).node.incarnation, 4u);
  EXPECT_EQ(m.Register(Rejoin(Role::kWorker, -1, 2, "job-a")).status().code(), absl::StatusCode::kInvalidArgument);
}

// A survivor registers again at the restarted scheduler and dies before its heartbeat
// stream is back: nothing breaks, so only its silence shows it. Its replacement is told
// to retry (UNAVAILABLE, naming the holder and when it is declared dead), not refused
// as a duplicate, and gets the rank once the sweep finds the holder dead.
TEST_F(RecoveryTest, AReplacementWaitsOutASurvivorThatDiedSilentlyAfterASchedulerRestart) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  Admit(m, Rejoin(Role::kServer, 0, 1));
  Admit(m, Rejoin(Role::kWorker, 0, 1));
  Admit(m, Rejoin(Role::kWorker, 1, 1));
  ASSERT_TRUE(m.AllRegistered());
  uint64_t i0 = 1, is = 1;
  clock_.now += absl::Seconds(1);
  auto early = m.Register(Req(Role::kWorker, 1));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(early.status().message().find("worker rank 1 is already held by pid 5001"), absl::string_view::npos)
      << early.status();
  EXPECT_NE(early.status().message().find("declares it dead after 10.0 s without a heartbeat"), absl::string_view::npos)
      << early.status();
  clock_.now += absl::Seconds(10);
  ASSERT_TRUE(m.Heartbeat({Role::kWorker, 0}, &i0, 1, 1).ok());
  ASSERT_TRUE(m.Heartbeat({Role::kServer, 0}, &is, 1, 1).ok());
  const std::vector<NodeRecord> dead = m.SweepSilent();
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].rank, 1);
  const Membership::Admission replacement = Admit(m, Req(Role::kWorker, 1));
  EXPECT_TRUE(replacement.rejoined);
  EXPECT_EQ(replacement.node.incarnation, 2u);
}

// The known limit of a scheduler restart: a worker that left before it does not come
// back. One heartbeat timeout after the first re-registration, with every server back,
// the missing workers are taken as FINISHED and the job starts.
TEST_F(RecoveryTest, RestartedSchedulerTakesWorkersThatDoNotComeBackAsFinished) {
  Membership m = MakeWithRejoin(3, 1, absl::Seconds(60));
  ASSERT_TRUE(m.Register(Rejoin(Role::kWorker, 1, 1, "job-a")).ok());
  clock_.now += absl::Seconds(5);
  EXPECT_TRUE(m.SettleRestart().empty()) << "every server must be back first";
  ASSERT_TRUE(m.Register(Rejoin(Role::kServer, 0, 1, "job-a")).ok());
  EXPECT_FALSE(m.AllRegistered());
  clock_.now += absl::Seconds(6);  // past the heartbeat timeout (10 s) since worker 1 came back
  const std::vector<NodeKey> assumed = m.SettleRestart();
  ASSERT_EQ(assumed.size(), 2u);
  EXPECT_EQ(assumed[0].rank, 0);
  EXPECT_EQ(assumed[1].rank, 2);
  EXPECT_TRUE(m.AllRegistered());
  EXPECT_TRUE(m.SettleRestart().empty()) << "once";
  EXPECT_EQ(m.Find({Role::kWorker, 0})->state, NodeState::kFinished);
  EXPECT_NE(m.Describe({Role::kWorker, 0}).find("assumed to have left"), std::string::npos);
  std::string reason;
  EXPECT_FALSE(m.JobOver(&reason)) << "worker 1 still runs";

  // A late node registers again with its incarnation; a new process takes a rank.
  Membership::Admission late = Admit(m, Rejoin(Role::kWorker, 2, 4, "job-a"));
  EXPECT_EQ(late.node.incarnation, 4u);
  EXPECT_TRUE(late.rejoined);
  Membership::Admission fresh = Admit(m, Rejoin(Role::kWorker, 0, 0, "job-a"));
  EXPECT_TRUE(fresh.rejoined);
  EXPECT_EQ(fresh.node.state, NodeState::kRejoining);
  EXPECT_EQ(fresh.node.restarts, 1);

  for (int r = 0; r < 3; ++r) ASSERT_TRUE(m.Leave({Role::kWorker, r}, false, "").ok());
  EXPECT_TRUE(m.JobOver(&reason));
  EXPECT_EQ(reason, "all 3 workers finished");
}

// Every worker had finished: only the server comes back, and learns the job is over.
TEST_F(RecoveryTest, RestartedSchedulerWithOnlyServersBackEndsTheJob) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  ASSERT_TRUE(m.Register(Rejoin(Role::kServer, 0, 1, "job-a")).ok());
  clock_.now += absl::Seconds(11);
  EXPECT_EQ(m.SettleRestart().size(), 2u);
  std::string reason;
  EXPECT_TRUE(m.JobOver(&reason));
  EXPECT_EQ(reason, "all 2 workers finished");
  EXPECT_TRUE(m.Failure().empty());
}

// A scheduler and a worker killed together: the restarted worker, a new process with
// no job id, reaches the restarted scheduler before the survivors do. The job keeps the
// survivors' id: none is made up before every node registered.
TEST_F(RecoveryTest, ANewProcessFirstAtARestartedSchedulerTakesTheSurvivorsJob) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  uint64_t fresh_ticket = 0;
  ASSERT_TRUE(m.Register(Rejoin(Role::kWorker, 0, 0), &fresh_ticket).ok());
  EXPECT_EQ(m.JobId(), "") << "nothing made up while survivors may be on their way";
  Admit(m, Rejoin(Role::kServer, 0, 1, "job-a"));
  Admit(m, Rejoin(Role::kWorker, 1, 1, "job-a"));
  ASSERT_TRUE(m.AllRegistered());
  EXPECT_TRUE(m.AwaitAllRegistered(fresh_ticket, absl::Now() + absl::Seconds(5), nullptr).ok());
  EXPECT_EQ(m.JobId(), "job-a");
  EXPECT_EQ(m.View().job_id, "job-a");
  EXPECT_TRUE(m.CheckCaller({Role::kServer, 0}, "job-a", 1).ok());
  // The new process replaces one that died with the old scheduler: it rejoins the
  // running job rather than starting it, with an incarnation above its predecessor's.
  auto fresh = m.Admitted(fresh_ticket);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(fresh->rejoined);
  EXPECT_EQ(fresh->node.state, NodeState::kRejoining);
  EXPECT_EQ(fresh->node.incarnation, 2u);
  EXPECT_EQ(fresh->node.restarts, 1);
  size_t cursor = 0;
  const std::vector<NodeRecord> back = m.RejoinsSince(&cursor);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].rank, 0);
  EXPECT_EQ(back[0].role, Role::kWorker);
}

// The restarted scheduler does not know how often a rank was restarted before; the
// servers do (they fence by incarnation) and say so when they register again. A new
// process for the rank gets an incarnation above theirs, so no server fences it as old.
TEST_F(RecoveryTest, ANewProcessAtARestartedSchedulerOutranksTheIncarnationsServersAdmitted) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  uint64_t fresh_ticket = 0;
  ASSERT_TRUE(m.Register(Rejoin(Role::kWorker, 0, 0, "job-a"), &fresh_ticket).ok());
  Registration server = Rejoin(Role::kServer, 0, 1, "job-a");
  server.worker_incarnations.push_back(3);  // worker 0 had been restarted twice
  server.worker_incarnations.push_back(1);
  Admit(m, server);
  Admit(m, Rejoin(Role::kWorker, 1, 1, "job-a"));
  ASSERT_TRUE(m.AllRegistered());
  auto fresh = m.Admitted(fresh_ticket);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->node.incarnation, 4u);
  EXPECT_TRUE(fresh->rejoined);
  // A report for more worker ranks than the job has is refused, as nothing from the
  // wire is trusted for a count.
  Registration bad = Rejoin(Role::kServer, 0, 1, "job-a");
  for (int i = 0; i < 3; ++i) bad.worker_incarnations.push_back(1);
  auto refused = m.Register(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("incarnations of 3 worker ranks, but the job has 2 workers"),
            absl::string_view::npos)
      << refused.status();
}

// The same with a new process that brings another id (a wrong DTRAIN_JOB_ID): the
// survivors' id wins, whatever the order, and the newcomer is the one refused.
TEST_F(RecoveryTest, ASurvivorsJobIdOutranksANewProcesssOther) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  uint64_t stray = 0;
  ASSERT_TRUE(m.Register(Rejoin(Role::kWorker, 0, 0, "job-x"), &stray).ok());
  EXPECT_EQ(m.JobId(), "job-x");  // held only until a survivor says otherwise
  Admit(m, Rejoin(Role::kServer, 0, 1, "job-a"));
  EXPECT_EQ(m.JobId(), "job-a");
  absl::StatusOr<int> refused = m.AwaitAllRegistered(stray, absl::Now() + absl::Seconds(5), nullptr);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("worker 0 (pid 5000) belongs to job 'job-x', but this scheduler runs "
                                            "job 'job-a': server pid 5001, which belonged to the job before"),
            absl::string_view::npos)
      << refused.status();
  EXPECT_FALSE(m.Find({Role::kWorker, 0}).has_value()) << "its rank is free again";
  // Another new process with the wrong id is refused at once; with the right one it is admitted.
  auto again = m.Register(Rejoin(Role::kWorker, 0, 0, "job-x"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  Admit(m, Rejoin(Role::kWorker, 1, 1, "job-a"));
  Admit(m, Rejoin(Role::kWorker, 0, 0, "job-a"));
  EXPECT_TRUE(m.AllRegistered());
  EXPECT_EQ(m.JobId(), "job-a");
  // Once the job runs its id is fixed, even against a node that claims to have survived.
  EXPECT_EQ(m.Register(Rejoin(Role::kWorker, 1, 7, "job-y")).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A scheduler that did not restart (registrations without incarnations) never settles.
TEST_F(RecoveryTest, AFreshStartIsNeverSettled) {
  Membership m = MakeWithRejoin(2, 1, absl::Seconds(60));
  ASSERT_TRUE(m.Register(Req(Role::kServer, 0)).ok());
  ASSERT_TRUE(m.Register(Req(Role::kWorker, 0)).ok());
  clock_.now += absl::Seconds(600);
  EXPECT_TRUE(m.SettleRestart().empty());
  EXPECT_FALSE(m.AllRegistered());
}

}  // namespace
}  // namespace dtrain::scheduler
