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
  RecordNodeMetrics({Node(v1::ROLE_SERVER, 0, v1::NODE_STATE_ALIVE, 0),
                     Node(v1::ROLE_WORKER, 0, v1::NODE_STATE_ALIVE, 120),
                     Node(v1::ROLE_WORKER, 1, v1::NODE_STATE_ALIVE, 112),
                     Node(v1::ROLE_WORKER, 2, v1::NODE_STATE_DEAD, 3)},
                    m);
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
}

}  // namespace
}  // namespace dtrain::scheduler
