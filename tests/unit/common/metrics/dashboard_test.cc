// deploy/grafana/dtrain-dashboard.json: it parses, every query names only metrics the
// processes export, and it covers what the issue asked the dashboard to show.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "services/inference/inference_metrics.h"
#include "common/metrics/registry.h"
#include "services/scheduler/scheduler_metrics.h"
#include "services/server/server_metrics.h"
#include "services/worker/worker_metrics.h"
#include "gtest/gtest.h"
#include "tests/unit/common/metrics/exposition.h"

namespace dtrain::metrics {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every sample name the four roles export, with every labelled series created.
std::set<std::string> ExportedNames() {
  std::set<std::string> names;
  auto add = [&names](MetricsRegistry& r) {
    r.SetRank(0);
    auto parsed = ::dtrain::testing::ParseExposition(r.Render());
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (parsed.ok()) {
      for (const auto& n : parsed->Names()) names.insert(n);
    }
  };
  MetricsRegistry w("worker"), s("server"), c("scheduler"), i("inference");
  worker::WorkerMetrics wm(w);
  server::ServerMetrics sm(s);
  scheduler::SchedulerMetrics cm(c);
  inference::InferenceMetrics im(i);
  im.RequestDone(absl::StatusCode::kOk, absl::Milliseconds(1));
  for (auto* r : {&w, &s, &c, &i}) add(*r);
  return names;
}

// The `expr` of every target of every panel (rows nest theirs) and templating query.
void CollectExprs(const nlohmann::json& j, std::vector<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if ((it.key() == "expr" || it.key() == "definition") && it->is_string()) out->push_back(*it);
      CollectExprs(*it, out);
    }
  } else if (j.is_array()) {
    for (const auto& e : j) CollectExprs(e, out);
  }
}

TEST(DashboardTest, ParsesAndUsesOnlyExportedMetrics) {
  const std::string path = std::string(DTRAIN_SOURCE_DIR) + "/deploy/grafana/dtrain-dashboard.json";
  const std::string text = Slurp(path);
  ASSERT_FALSE(text.empty()) << "cannot read " << path;
  nlohmann::json dash;
  ASSERT_NO_THROW(dash = nlohmann::json::parse(text)) << path;
  ASSERT_TRUE(dash.contains("panels"));
  EXPECT_EQ(dash["uid"], "dtrain-training");

  std::vector<std::string> exprs;
  CollectExprs(dash, &exprs);
  ASSERT_GT(exprs.size(), 20u);
  const std::set<std::string> exported = ExportedNames();
  const std::regex metric(R"(\bdtrain_[a-z0-9_]+)");
  std::set<std::string> used;
  for (const std::string& e : exprs) {
    for (auto it = std::sregex_iterator(e.begin(), e.end(), metric); it != std::sregex_iterator(); ++it) {
      used.insert(it->str());
    }
  }
  for (const std::string& name : used) EXPECT_TRUE(exported.count(name) > 0) << name << " is not exported";

  // What the dashboard must show (the issue's list).
  for (const char* needed :
       {"dtrain_worker_samples_total", "dtrain_worker_train_loss", "dtrain_worker_train_accuracy",
        "dtrain_worker_validation_accuracy", "dtrain_worker_step_seconds_sum", "dtrain_server_sync_wait_seconds_bucket",
        "dtrain_scheduler_worker_lag_steps", "dtrain_worker_pushed_bytes_total", "dtrain_worker_pulled_bytes_total",
        "dtrain_inference_request_duration_seconds_bucket"}) {
    EXPECT_TRUE(used.count(needed) > 0) << "the dashboard does not show " << needed;
  }
}

TEST(DashboardTest, EveryQueryUsesThePrometheusDatasourceVariable) {
  const nlohmann::json dash =
      nlohmann::json::parse(Slurp(std::string(DTRAIN_SOURCE_DIR) + "/deploy/grafana/dtrain-dashboard.json"));
  bool has_variable = false;
  for (const auto& v : dash["templating"]["list"]) {
    if (v["name"] == "datasource") has_variable = v["type"] == "datasource" && v["query"] == "prometheus";
  }
  EXPECT_TRUE(has_variable);
  int targets = 0;
  for (const auto& p : dash["panels"]) {
    if (p["type"] == "row") continue;
    EXPECT_EQ(p["datasource"]["type"], "prometheus") << p["title"];
    EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << p["title"];
    for (const auto& t : p["targets"]) {
      EXPECT_FALSE(t["expr"].get<std::string>().empty()) << p["title"];
      ++targets;
    }
  }
  EXPECT_GT(targets, 20);
}

}  // namespace
}  // namespace dtrain::metrics
