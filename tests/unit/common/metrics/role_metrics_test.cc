// The families each role exports: names, types, labels, and counters that only grow.
#include <map>
#include <set>
#include <string>

#include "services/inference/inference_metrics.h"
#include "common/metrics/registry.h"
#include "services/scheduler/scheduler_metrics.h"
#include "services/server/server_metrics.h"
#include "services/worker/worker_metrics.h"
#include "gtest/gtest.h"
#include "tests/unit/common/metrics/exposition.h"

namespace dtrain::metrics {
namespace {

using ::dtrain::testing::Exposition;
using ::dtrain::testing::ParseExposition;

Exposition Render(const MetricsRegistry& registry) {
  auto parsed = ParseExposition(registry.Render());
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << registry.Render();
  return parsed.ok() ? *parsed : Exposition();
}

double Value(const Exposition& e, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  auto found = e.Find(name, labels);
  EXPECT_EQ(found.size(), 1u) << name;
  return found.empty() ? -1 : found[0].value;
}

// Labels other than these would be per-key or per-step: unbounded series.
void ExpectBoundedLabels(const Exposition& e) {
  // "encoding": wire or float32 (gradient compression), two values; "version" and
  // "commit": dtrain_build_info's, one value per process.
  static const std::set<std::string> kAllowed = {"role", "rank", "phase",    "node_role", "state", "group",
                                                 "code", "le",   "encoding", "version",   "commit"};
  for (const auto& s : e.samples) {
    for (const auto& [k, v] : s.labels) EXPECT_TRUE(kAllowed.count(k) > 0) << s.name << " has label " << k;
  }
}

TEST(WorkerMetricsTest, StepsSplitIntoFourPhasesAndCountersGrow) {
  MetricsRegistry registry("worker");
  registry.SetRank(1);
  worker::WorkerMetrics m(registry);
  m.SetEpoch(2);
  m.StepDone(64, {0.020, 0.001, 0.004, 0.002});
  m.AddBytes(1000, 2000);
  m.SetTrainFigures(0.5, 0.8);
  m.SetValidationAccuracy(0.85);
  const Exposition a = Render(registry);
  EXPECT_EQ(Value(a, "dtrain_worker_samples_total"), 64);
  EXPECT_EQ(Value(a, "dtrain_worker_steps_total"), 1);
  EXPECT_EQ(Value(a, "dtrain_worker_epoch"), 2);
  EXPECT_EQ(Value(a, "dtrain_worker_train_loss"), 0.5);
  EXPECT_EQ(Value(a, "dtrain_worker_train_accuracy"), 0.8);
  EXPECT_EQ(Value(a, "dtrain_worker_validation_accuracy"), 0.85);
  EXPECT_EQ(Value(a, "dtrain_worker_pushed_bytes_total"), 1000);
  EXPECT_EQ(Value(a, "dtrain_worker_pulled_bytes_total"), 2000);
  for (const char* phase : {"compute", "push", "wait", "pull"}) {
    EXPECT_EQ(Value(a, "dtrain_worker_step_seconds_count", {{"phase", phase}}), 1) << phase;
  }
  EXPECT_DOUBLE_EQ(Value(a, "dtrain_worker_step_seconds_sum", {{"phase", "compute"}}), 0.020);
  EXPECT_EQ(Value(a, "dtrain_worker_step_seconds_bucket", {{"phase", "wait"}, {"le", "0.005"}}), 1);
  EXPECT_EQ(Value(a, "dtrain_worker_step_seconds_bucket", {{"phase", "wait"}, {"le", "0.0025"}}), 0);
  ExpectBoundedLabels(a);

  m.StepDone(64, {0.020, 0.001, 0.004, 0.002});
  m.AddBytes(0, 0);
  const Exposition b = Render(registry);
  EXPECT_EQ(Value(b, "dtrain_worker_samples_total"), 128);
  EXPECT_EQ(Value(b, "dtrain_worker_pushed_bytes_total"), 1000);
  EXPECT_EQ(a.types.at("dtrain_worker_samples_total"), "counter");
  EXPECT_EQ(a.types.at("dtrain_worker_epoch"), "gauge");
}

TEST(ServerMetricsTest, RequestsBytesWaitsStalenessUpdatesWorkers) {
  MetricsRegistry registry("server");
  registry.SetRank(0);
  server::ServerMetrics m(registry);
  m.PushReceived(400);
  m.PullRequested();
  m.PullAnswered(400, 400);
  m.RequestFailed();
  m.SyncStepMerged(0.03);
  m.PushStaleness(3);
  m.UpdateApplied(0.25);
  m.WorkerSeen();
  m.WorkerSeen();
  const Exposition e = Render(registry);
  EXPECT_EQ(Value(e, "dtrain_server_push_requests_total"), 1);
  EXPECT_EQ(Value(e, "dtrain_server_pull_requests_total"), 1);
  EXPECT_EQ(Value(e, "dtrain_server_push_bytes_total"), 400);
  EXPECT_EQ(Value(e, "dtrain_server_pull_bytes_total"), 400);
  EXPECT_DOUBLE_EQ(Value(e, "dtrain_server_update_seconds_total"), 0.25);
  EXPECT_EQ(Value(e, "dtrain_server_request_errors_total"), 1);
  EXPECT_EQ(Value(e, "dtrain_server_updates_applied_total"), 1);
  EXPECT_EQ(Value(e, "dtrain_server_workers_seen"), 2);
  EXPECT_EQ(Value(e, "dtrain_server_sync_wait_seconds_count"), 1);
  EXPECT_EQ(Value(e, "dtrain_server_push_staleness_updates_bucket", {{"le", "4"}}), 1);
  EXPECT_EQ(Value(e, "dtrain_server_push_staleness_updates_bucket", {{"le", "2"}}), 0);
  ExpectBoundedLabels(e);
}

TEST(SchedulerMetricsTest, NodesDeathsBarriersLag) {
  MetricsRegistry registry("scheduler");
  registry.SetRank(0);
  scheduler::SchedulerMetrics m(registry);
  m.SetNodeCount(Role::kWorker, "alive", 2);
  m.SetNodeCount(Role::kScheduler, "alive", 9);  // ignored: the scheduler is no node of the job
  m.SetNodeCount(Role::kWorker, "nonsense", 9);  // ignored
  m.NodeDied(Role::kServer);
  m.BarrierWaited("workers", 0.2, true);
  m.BarrierWaited("workers", 5, false);
  m.SetWorkerSteps(90, 1, 100);
  const Exposition e = Render(registry);
  EXPECT_EQ(Value(e, "dtrain_scheduler_nodes", {{"node_role", "worker"}, {"state", "alive"}}), 2);
  EXPECT_EQ(Value(e, "dtrain_scheduler_nodes", {{"node_role", "server"}, {"state", "dead"}}), 0);
  EXPECT_EQ(e.Find("dtrain_scheduler_nodes").size(), 10u);  // {worker, server} x 5 states
  EXPECT_EQ(Value(e, "dtrain_scheduler_deaths_total", {{"node_role", "server"}}), 1);
  EXPECT_EQ(Value(e, "dtrain_scheduler_barrier_wait_seconds_count", {{"group", "workers"}}), 2);
  EXPECT_EQ(Value(e, "dtrain_scheduler_barrier_failures_total", {{"group", "workers"}}), 1);
  EXPECT_EQ(Value(e, "dtrain_scheduler_slowest_worker_step"), 90);
  EXPECT_EQ(Value(e, "dtrain_scheduler_slowest_worker_rank"), 1);
  EXPECT_EQ(Value(e, "dtrain_scheduler_fastest_worker_step"), 100);
  EXPECT_EQ(Value(e, "dtrain_scheduler_worker_lag_steps"), 10);
  ExpectBoundedLabels(e);
}

TEST(InferenceMetricsTest, RequestsByCodeLatencyLoadedEpoch) {
  MetricsRegistry registry("inference");
  registry.SetRank(0);
  inference::InferenceMetrics m(registry);
  EXPECT_EQ(Value(Render(registry), "dtrain_inference_loaded_epoch"), -1);
  m.SetLoadedEpoch(4);
  m.RequestDone(absl::StatusCode::kOk, absl::Milliseconds(3));
  m.RequestDone(absl::StatusCode::kOk, absl::Milliseconds(7));
  m.RequestDone(absl::StatusCode::kInvalidArgument, absl::Milliseconds(1));
  const Exposition e = Render(registry);
  EXPECT_EQ(Value(e, "dtrain_inference_requests_total", {{"code", "OK"}}), 2);
  EXPECT_EQ(Value(e, "dtrain_inference_requests_total", {{"code", "INVALID_ARGUMENT"}}), 1);
  EXPECT_EQ(e.Find("dtrain_inference_requests_total").size(), 2u);
  EXPECT_EQ(Value(e, "dtrain_inference_request_duration_seconds_count"), 3);
  EXPECT_EQ(Value(e, "dtrain_inference_request_duration_seconds_bucket", {{"le", "0.005"}}), 2);
  EXPECT_EQ(Value(e, "dtrain_inference_loaded_epoch"), 4);
  ExpectBoundedLabels(e);
}

}  // namespace
}  // namespace dtrain::metrics
