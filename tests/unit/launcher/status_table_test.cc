// `dtrain status`'s table for a job in recovery (docs/recovery.md): REJOINING, the
// incarnation and restarts of each rank, and how long a dead node has been dead and why.
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/launcher/status_table.h"

namespace dtrain::launcher {
namespace {

v1::NodeInfo Node(v1::Role role, int rank, v1::NodeState state, uint64_t incarnation, int restarts, int64_t step,
                  double speed, int64_t heard_ms) {
  v1::NodeInfo n;
  n.set_role(role);
  n.set_rank(rank);
  n.set_address(role == v1::ROLE_SERVER ? "127.0.0.1:40123" : "127.0.0.1");
  n.set_state(state);
  n.set_incarnation(incarnation);
  n.set_restarts(restarts);
  n.set_last_step(step);
  n.set_samples_per_sec(speed);
  n.set_last_heard_unix_ms(heard_ms);
  return n;
}

v1::GetStatusResponse Job() {
  v1::GetStatusResponse s;
  s.mutable_cluster()->set_kv_store("dist_sync");
  s.mutable_cluster()->set_num_workers(3);
  s.mutable_cluster()->set_num_servers(1);
  return s;
}

TEST(StatusTableTest, ShowsIncarnationsRestartsRejoiningAndHowLongADeadNodeIsDead) {
  v1::GetStatusResponse s = Job();
  s.set_now_unix_ms(100000);
  *s.add_nodes() = Node(v1::ROLE_SERVER, 0, v1::NODE_STATE_ALIVE, 1, 0, 0, 0, 99600);
  *s.add_nodes() = Node(v1::ROLE_WORKER, 0, v1::NODE_STATE_ALIVE, 1, 0, 812, 1203.5, 99800);
  *s.add_nodes() = Node(v1::ROLE_WORKER, 1, v1::NODE_STATE_REJOINING, 2, 1, 790, 0, 99900);
  v1::NodeInfo dead = Node(v1::ROLE_WORKER, 2, v1::NODE_STATE_DEAD, 3, 2, 805, 980, 87000);
  dead.set_dead_since_unix_ms(88000);
  dead.set_death_reason("heartbeat stream broke");
  *s.add_nodes() = dead;
  // The lag comes from steps sampled at one tick, not from the STEP column.
  s.mutable_worker_lag()->set_at_unix_ms(99000);
  s.mutable_worker_lag()->set_slowest_step(789);
  s.mutable_worker_lag()->set_slowest_rank(1);
  s.mutable_worker_lag()->set_fastest_step(790);
  s.mutable_worker_lag()->set_steps(1);
  EXPECT_EQ(FormatStatus(s, "127.0.0.1:9091"),
            "job at 127.0.0.1:9091: dist_sync, 3 workers, 1 server\n"
            "ROLE    RANK  ADDRESS          STATE      INC RESTARTS     STEP  SAMPLES/S  LAST HEARD\n"
            "server     0  127.0.0.1:40123  ALIVE        1        0        -          -  0.4 s ago\n"
            "worker     0  127.0.0.1        ALIVE        1        0      812     1203.5  0.2 s ago\n"
            "worker     1  127.0.0.1        REJOINING    2        1      790        0.0  0.1 s ago\n"
            "worker     2  127.0.0.1        DEAD         3        2      805      980.0  dead for 12 s (heartbeat "
            "stream broke)\n"
            "workers: steps 789..790 1.0 s ago (lag 1), 1203.5 samples/s in all\n");
}

// An older scheduler: no incarnations, no clock in the answer, deaths without a time.
TEST(StatusTableTest, AnElasticJobShowsItsLatestGeneration) {
  v1::GetStatusResponse s = Job();
  EXPECT_FALSE(absl::StrContains(FormatStatus(s, "127.0.0.1:9091"), "elastic"));
  v1::MembershipState* m = s.mutable_membership();
  m->set_min_workers(2);
  m->set_max_workers(4);
  m->add_generations()->add_ranks(0);
  v1::MembershipGeneration* g = m->add_generations();
  g->set_from_step(180);
  for (int r : {0, 1, 2}) g->add_ranks(r);
  const std::string table = FormatStatus(s, "127.0.0.1:9091");
  EXPECT_TRUE(absl::StrContains(table, "\nworkers: 3 (elastic 2:4, generation 1 from step 180)\n")) << table;
}

TEST(StatusTableTest, OlderSchedulersAnswerStillPrints) {
  v1::GetStatusResponse s = Job();
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  *s.add_nodes() = Node(v1::ROLE_WORKER, 0, v1::NODE_STATE_ALIVE, 0, 0, 5, 10, now_ms - 2000);
  *s.add_nodes() = Node(v1::ROLE_WORKER, 1, v1::NODE_STATE_DEAD, 0, 0, 5, 10, now_ms - 60000);
  v1::NodeInfo dead = Node(v1::ROLE_WORKER, 2, v1::NODE_STATE_DEAD, 1, 0, 5, 10, now_ms - 60000);
  dead.set_dead_since_unix_ms(now_ms - 30000);  // no reason given
  *s.add_nodes() = dead;
  const std::string t = FormatStatus(s, "h:1");
  // This machine's clock stands in for the scheduler's (seconds, not 50 years, ago).
  EXPECT_TRUE(absl::StrContains(t, "worker     0  127.0.0.1  ALIVE        -        0        5       10.0  2.")) << t;
  EXPECT_TRUE(absl::StrContains(t, "DEAD         -        0        5       10.0  60.")) << t;
  EXPECT_TRUE(absl::StrContains(t, "DEAD         1        0        5       10.0  dead for 30 s\n")) << t;
  EXPECT_TRUE(absl::StrContains(t, "workers: steps 5..5 (lag not sampled yet)")) << t;
}

// Replication: each home server's chain, the member serving the weights starred; a
// dead member marked, a restarted one (back once its keys are copied) starred only
// when nobody else in the chain is alive.
TEST(StatusTableTest, ShowsEachRangesChainAndWhoServesIt) {
  v1::GetStatusResponse s = Job();
  s.mutable_cluster()->set_num_servers(3);
  s.mutable_cluster()->set_replication(2);
  s.set_now_unix_ms(100000);
  *s.add_nodes() = Node(v1::ROLE_SERVER, 0, v1::NODE_STATE_ALIVE, 1, 0, 0, 0, 99600);
  v1::NodeInfo dead = Node(v1::ROLE_SERVER, 1, v1::NODE_STATE_DEAD, 1, 0, 0, 0, 90000);
  *s.add_nodes() = dead;
  *s.add_nodes() = Node(v1::ROLE_SERVER, 2, v1::NODE_STATE_ALIVE, 2, 1, 0, 0, 99600);
  const std::string text = FormatStatus(s, "127.0.0.1:9091");
  EXPECT_TRUE(absl::StrContains(text,
                                "key ranges (--replication 2): chain of each home server, * = serves the weights\n"
                                "  range 0: server 0* server 1 (dead)\n"
                                "  range 1: server 1 (dead) server 2* (restarted)\n"
                                "  range 2: server 2 (restarted) server 0*\n"))
      << text;
  s.mutable_cluster()->set_replication(1);
  EXPECT_FALSE(absl::StrContains(FormatStatus(s, "127.0.0.1:9091"), "key ranges")) << text;
}

}  // namespace
}  // namespace dtrain::launcher
