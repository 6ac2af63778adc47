// The scheduler's node gauges from its node list.
#include "services/scheduler/node_metrics.h"

#include "common/metrics/registry.h"
#include "gtest/gtest.h"
#include "tests/unit/common/metrics/exposition.h"

namespace dtrain::scheduler {
namespace {

v1::NodeInfo Node(v1::Role role, int rank, v1::NodeState state, int64_t step) {
  v1::NodeInfo n;
  n.set_role(role);
  n.set_rank(rank);
  n.set_state(state);
  n.set_last_step(step);
  return n;
}

TEST(NodeMetricsTest, CountsByRoleAndStateAndSpreadsLiveWorkersSteps) {
  metrics::MetricsRegistry registry("scheduler");
  registry.SetRank(0);
  scheduler::SchedulerMetrics m(registry);
  const std::vector<v1::NodeInfo> nodes = {
      Node(v1::ROLE_SERVER, 0, v1::NODE_STATE_ALIVE, 0), Node(v1::ROLE_WORKER, 0, v1::NODE_STATE_ALIVE, 130),
      Node(v1::ROLE_WORKER, 1, v1::NODE_STATE_ALIVE, 112), Node(v1::ROLE_WORKER, 2, v1::NODE_STATE_DEAD, 3)};
  // The steps come from one tick (WorkerLagTracker), not from the latest reports,
  // which are up to a heartbeat apart (130 vs 112 would be a lag of 18).
  v1::WorkerLag lag;
  lag.set_at_unix_ms(5000);
  lag.set_slowest_step(112);
  lag.set_slowest_rank(1);
  lag.set_fastest_step(120);
  lag.set_steps(8);
  RecordNodeMetrics(nodes, lag, m);
  auto e = ::dtrain::testing::ParseExposition(registry.Render());
  ASSERT_TRUE(e.ok()) << e.status();
  auto value = [&](const std::string& name, std::map<std::string, std::string> labels = {}) {
    auto found = e->Find(name, labels);
    return found.size() == 1 ? found[0].value : -1;
  };
  EXPECT_EQ(value("dtrain_scheduler_nodes", {{"node_role", "worker"}, {"state", "alive"}}), 2);
  EXPECT_EQ(value("dtrain_scheduler_nodes", {{"node_role", "worker"}, {"state", "dead"}}), 1);
  EXPECT_EQ(value("dtrain_scheduler_nodes", {{"node_role", "server"}, {"state", "alive"}}), 1);
  EXPECT_EQ(value("dtrain_scheduler_nodes", {{"node_role", "server"}, {"state", "finished"}}), 0);
  EXPECT_EQ(value("dtrain_scheduler_slowest_worker_step"), 112);
  EXPECT_EQ(value("dtrain_scheduler_slowest_worker_rank"), 1);
  EXPECT_EQ(value("dtrain_scheduler_fastest_worker_step"), 120);
  EXPECT_EQ(value("dtrain_scheduler_worker_lag_steps"), 8);
  EXPECT_EQ(StateLabel(v1::NODE_STATE_FINISHED), "finished");

  // No tick in common (yet): the step gauges keep their values.
  RecordNodeMetrics(nodes, std::nullopt, m);
  e = ::dtrain::testing::ParseExposition(registry.Render());
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(value("dtrain_scheduler_worker_lag_steps"), 8);
}

}  // namespace
}  // namespace dtrain::scheduler
