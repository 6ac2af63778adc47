// MetricsRegistry and StartMetrics: the endpoint, its labels, its flags.
#include "common/metrics/registry.h"

#include <pthread.h>

#include <fstream>
#include <string>

#include "common/metrics/thread_stack_floor.h"
#include "services/worker/worker_metrics.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"
#include "tests/unit/common/metrics/exposition.h"
#include "tests/unit/common/metrics/http_get.h"

namespace dtrain::metrics {
namespace {

using ::dtrain::testing::HttpGet;
using ::dtrain::testing::ParseExposition;

TEST(MetricsRegistryTest, ServesNothingUntilTheRankIsKnownThenLabelsEverySeries) {
  MetricsRegistry registry("worker");
  worker::WorkerMetrics worker(registry);
  worker.StepDone(64, {0.01, 0.001, 0.002, 0.003});
  ASSERT_TRUE(registry.Serve("127.0.0.1", 0).ok());
  ASSERT_GT(registry.port(), 0);

  auto before = HttpGet(registry.port(), "/metrics");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->status, 200);
  EXPECT_EQ(before->body.find("dtrain_"), std::string::npos) << before->body;

  registry.SetRank(3);
  auto after = HttpGet(registry.port(), "/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  auto parsed = ParseExposition(after->body);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << after->body;
  int dtrain_samples = 0;
  for (const auto& s : parsed->samples) {
    if (s.name.rfind("dtrain_", 0) != 0) continue;  // prometheus-cpp's own exposer_* series
    ++dtrain_samples;
    EXPECT_EQ(s.labels.at("role"), "worker") << s.name;
    EXPECT_EQ(s.labels.at("rank"), "3") << s.name;
  }
  EXPECT_GT(dtrain_samples, 10);
  ASSERT_EQ(parsed->Find("dtrain_worker_samples_total").size(), 1u);
  EXPECT_EQ(parsed->Find("dtrain_worker_samples_total")[0].value, 64);
  EXPECT_EQ(parsed->types.at("dtrain_worker_step_seconds"), "histogram");
}

// civetweb's 100 KB thread stacks are raised to the floor (thread_stack_floor.h): without
// it, a process holding OpenBLAS's thread-local storage cannot start the endpoint.
TEST(MetricsRegistryTest, TheEndpointsThreadsGetAtLeastTheStackFloor) {
  const size_t before = RaisedStackRequests();
  MetricsRegistry registry("worker");
  ASSERT_TRUE(registry.Serve("127.0.0.1", 0).ok());
  EXPECT_GT(RaisedStackRequests(), before) << "civetweb's stack requests did not reach the floor";
  // What the floor does, seen from here: a small request comes back raised, a large one
  // unchanged.
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  size_t size = 0;
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 100 * 1024), 0);
  ASSERT_EQ(pthread_attr_getstacksize(&attr, &size), 0);
  EXPECT_EQ(size, kThreadStackFloor);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 4 * kThreadStackFloor), 0);
  ASSERT_EQ(pthread_attr_getstacksize(&attr, &size), 0);
  EXPECT_EQ(size, 4 * kThreadStackFloor);
  pthread_attr_destroy(&attr);
}

TEST(MetricsRegistryTest, ABusyPortIsUnavailableNamingTheAddress) {
  MetricsRegistry first("server");
  ASSERT_TRUE(first.Serve("127.0.0.1", 0).ok());
  MetricsRegistry second("server");
  absl::Status s = second.Serve("127.0.0.1", first.port());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(s.message()).find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << s;
}

TEST(StartMetricsTest, OffByDefaultOnWithPortFile) {
  MetricsFlags off;
  auto none = StartMetrics(off, "worker");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);

  MetricsFlags on;
  on.port = 0;
  on.host = "127.0.0.1";
  const dtrain::testing::TempDir dir;  // removed with the port file when the test ends
  on.port_file = dir.File("metrics.port");
  auto registry = StartMetrics(on, "scheduler");
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_NE(*registry, nullptr);
  std::ifstream in(on.port_file);
  int port = 0;
  in >> port;
  EXPECT_EQ(port, (*registry)->port());
}

TEST(MetricsFlagsTest, BadValuesNameTheFlag) {
  MetricsFlags f;
  f.port = 70000;
  EXPECT_NE(std::string(CheckMetricsFlags(f).message()).find("--metrics-port"), std::string::npos);
  f.port = -2;
  EXPECT_FALSE(CheckMetricsFlags(f).ok());
  f.port = -1;
  f.port_file = "/tmp/x";
  EXPECT_NE(std::string(CheckMetricsFlags(f).message()).find("--metrics-port-file"), std::string::npos);
  f.port = 0;
  EXPECT_TRUE(CheckMetricsFlags(f).ok());
  f.host = "";
  EXPECT_FALSE(CheckMetricsFlags(f).ok());
}

TEST(MetricsFlagsTest, ReadFromTheEnvironment) {
  FlagSet flags("t", "t");
  MetricsFlags f;
  AddMetricsFlags(flags, &f);
  flags.set_env_lookup(
      [](const char* name) -> const char* { return std::string(name) == "DTRAIN_METRICS_PORT" ? "9400" : nullptr; });
  ASSERT_TRUE(flags.Parse(std::vector<std::string>{}).ok());
  EXPECT_EQ(f.port, 9400);
}

}  // namespace
}  // namespace dtrain::metrics
