// TrainingMonitor: running figures, heartbeat progress, metrics and the epoch CSV,
// against a fake kvstore (no LibTorch).
#include "services/worker/training_monitor.h"

#include <string>

#include "common/metrics/metrics_csv.h"
#include "common/metrics/registry.h"
#include "gtest/gtest.h"
#include "tests/unit/common/metrics/exposition.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::worker {
namespace {

class FakeKV : public KVStore {
 public:
  KVStoreMode mode() const override { return KVStoreMode::kDistSync; }
  absl::Status Init(const std::vector<ParamRef>&, const KVStoreInit&) override { return absl::OkStatus(); }
  absl::Status PushPull(int64_t, const std::vector<const float*>&) override { return absl::OkStatus(); }
  absl::StatusOr<checkpoint::OptimizerStates> SaveStates() override { return checkpoint::OptimizerStates(); }
  KVStoreStats stats() const override { return stats_; }
  PushPullTiming last_timing() const override { return {0.001, 0.002, 0.003}; }

  KVStoreStats stats_;
};

// Rank 0 of two workers, recording what it is told.
class FakeCluster : public Cluster {
 public:
  int rank() const override { return 0; }
  int num_workers() const override { return 2; }
  const std::vector<ServerEndpoint>& servers() const override { return servers_; }
  absl::Status Barrier(const std::string&, absl::Duration) override { return absl::OkStatus(); }
  void ReportProgress(int64_t step, double speed) override {
    reported_step = step;
    reported_speed = speed;
  }
  absl::Status JobStatus() const override { return absl::OkStatus(); }
  absl::Status Finish(bool, const std::string&) override { return absl::OkStatus(); }

  std::vector<ServerEndpoint> servers_;
  int64_t reported_step = -1;
  double reported_speed = 0;
};

TEST(TrainingMonitorTest, TracksLossAccuracyBytesAndWritesOneCsvRowPerEpoch) {
  FakeKV kv;
  FakeCluster cluster;
  metrics::MetricsRegistry registry("worker");
  registry.SetRank(0);
  worker::WorkerMetrics m(registry);
  const dtrain::testing::TempDir dir;  // removed with the CSV when the test ends
  const std::string csv = dir.File("monitor-metrics.csv");
  TrainingMonitor monitor(cluster, kv, &m, csv);

  monitor.StartEpoch(0);
  kv.stats_ = {100, 200};
  monitor.StepDone(0, 10, 2.0, 5, 0.01);
  kv.stats_ = {300, 600};
  monitor.StepDone(1, 10, 1.0, 10, 0.01);
  const TrainingMonitor::Figures w = monitor.TakeWindow();
  EXPECT_EQ(w.samples, 20);
  EXPECT_DOUBLE_EQ(w.loss, 1.5);
  EXPECT_DOUBLE_EQ(w.accuracy, 0.75);
  EXPECT_EQ(monitor.TakeWindow().samples, 0);
  EXPECT_EQ(monitor.Epoch().samples, 20);

  auto e = ::dtrain::testing::ParseExposition(registry.Render());
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->Find("dtrain_worker_samples_total")[0].value, 20);
  EXPECT_EQ(e->Find("dtrain_worker_pushed_bytes_total")[0].value, 300);
  EXPECT_EQ(e->Find("dtrain_worker_pulled_bytes_total")[0].value, 600);
  EXPECT_DOUBLE_EQ(e->Find("dtrain_worker_train_loss")[0].value, 1.5);
  EXPECT_DOUBLE_EQ(e->Find("dtrain_worker_step_seconds_sum", {{"phase", "pull"}})[0].value, 0.006);

  ASSERT_TRUE(monitor.EpochDone(2.0, 0.9).ok());
  monitor.StartEpoch(1);
  monitor.StepDone(2, 10, 0.5, 9, 0.01);
  ASSERT_TRUE(monitor.EpochDone(1.0, 0.95).ok());
  auto rows = metrics::ReadEpochFigures(csv);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].samples, 20);
  EXPECT_DOUBLE_EQ((*rows)[0].samples_per_sec, 10);
  EXPECT_DOUBLE_EQ((*rows)[0].validation_accuracy, 0.9);
  EXPECT_DOUBLE_EQ((*rows)[1].train_loss, 0.5);
  EXPECT_EQ((*rows)[1].workers, 2);
}

TEST(TrainingMonitorTest, WorksWithoutMetricsOrCsv) {
  FakeKV kv;
  FakeCluster cluster;
  TrainingMonitor monitor(cluster, kv, nullptr, "");
  monitor.StartEpoch(0);
  monitor.StepDone(0, 10, 1.0, 5, 0.01);
  EXPECT_TRUE(monitor.EpochDone(1.0, 0.5).ok());
}

// The run's "per step" line: each phase's mean over every step, metrics on or off.
TEST(TrainingMonitorTest, StepTimeLineAveragesEveryPhaseOverTheRun) {
  FakeKV kv;  // push 1 ms, wait 2 ms, pull 3 ms each step
  FakeCluster cluster;
  TrainingMonitor monitor(cluster, kv, nullptr, "");
  monitor.StartEpoch(0);
  monitor.StepDone(0, 10, 1.0, 5, 0.010);
  monitor.StepDone(1, 10, 1.0, 5, 0.020);
  monitor.StartEpoch(1);
  monitor.StepDone(2, 10, 1.0, 5, 0.030);
  EXPECT_EQ(monitor.StepTimeLine(), "per step: compute 20.00 ms, push 1.00 ms, wait 2.00 ms, pull 3.00 ms (3 steps)");
}

// The heartbeats sample the step at shared ticks, so it must be current at
// every step, not refreshed once a second (that made dist_sync workers look 20 apart).
TEST(TrainingMonitorTest, ReportsTheStepAtEveryStep) {
  FakeKV kv;
  FakeCluster cluster;
  TrainingMonitor monitor(cluster, kv, nullptr, "");
  monitor.StartEpoch(0);
  for (int64_t step = 0; step < 5; ++step) {
    monitor.StepDone(step, 10, 1.0, 5, 0.0);
    EXPECT_EQ(cluster.reported_step, step + 1);
  }
}

}  // namespace
}  // namespace dtrain::worker
