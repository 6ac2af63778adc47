// A real job watched as a user would: `dtrain launch` with metrics on, every
// process's /metrics scraped, a real Prometheus server (Debian's /usr/bin/prometheus,
// on loopback, with a config made from deploy/prometheus/prometheus.yml) asked over
// its HTTP API, and `dtrain status` against the live scheduler. One run serves every
// test of the suite; it is stopped at the end (it would train for minutes).
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/unit/common/metrics/exposition.h"
#include "tests/unit/common/metrics/http_get.h"

namespace dtrain::testing {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr absl::Duration kReady = absl::Seconds(60);

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Target {
  std::string role;
  int rank = 0;
  int port = 0;
};

// What each role must export (the issue's list), by sample name.
const std::map<std::string, std::vector<std::string>>& Required() {
  static const std::map<std::string, std::vector<std::string>> r = {
      {"scheduler",
       {"dtrain_scheduler_nodes", "dtrain_scheduler_deaths_total", "dtrain_scheduler_barrier_wait_seconds_count",
        "dtrain_scheduler_slowest_worker_step", "dtrain_scheduler_fastest_worker_step",
        "dtrain_scheduler_worker_lag_steps"}},
      {"server",
       {"dtrain_server_push_requests_total", "dtrain_server_pull_requests_total", "dtrain_server_push_bytes_total",
        "dtrain_server_pull_bytes_total", "dtrain_server_sync_wait_seconds_bucket",
        "dtrain_server_updates_applied_total", "dtrain_server_update_seconds_total", "dtrain_server_workers_seen",
        "dtrain_server_push_staleness_updates_count"}},
      {"worker",
       {"dtrain_worker_samples_total", "dtrain_worker_steps_total", "dtrain_worker_epoch", "dtrain_worker_train_loss",
        "dtrain_worker_train_accuracy", "dtrain_worker_validation_accuracy", "dtrain_worker_step_seconds_bucket",
        "dtrain_worker_pushed_bytes_total", "dtrain_worker_pulled_bytes_total"}},
  };
  return r;
}

class ObservedRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = MakeTempDir();
    targets_file_ = dir_ + "/targets.json";
    // Prometheus first: it watches for the target list that the launch writes.
    if (::access(kPrometheus, X_OK) == 0) StartPrometheus();
    launch_ = std::make_unique<Subprocess>(std::vector<std::string>{
        Bin("dtrain"), "launch", "-n", "2", "-s", "1", "--metrics-file-sd", targets_file_, "--", "--network", "mlp",
        "--num-epochs", "5", "--disp-batches", "100", "--threads", "1"});
    if (!launch_->WaitForOutput("Prometheus targets written", kReady)) {
      setup_error_ = "dtrain launch did not write its metrics targets in time:\n" + launch_->output();
      return;
    }
    const std::string out = launch_->output();
    const size_t at = out.find("scheduler at ");
    if (at != std::string::npos) scheduler_ = out.substr(at + 13, out.find(';', at) - at - 13);
    nlohmann::json list = nlohmann::json::parse(Slurp(targets_file_), nullptr, false);
    for (const auto& entry : list) {
      const std::string address = entry["targets"][0];
      const std::string process = entry["labels"]["dtrain_process"];
      Target t;
      t.role = process.substr(0, process.find('-'));
      absl::SimpleAtoi(process.substr(process.find('-') + 1), &t.rank);
      absl::SimpleAtoi(address.substr(address.find(':') + 1), &t.port);
      targets_.push_back(t);
    }
  }

  static void StartPrometheus() {
    std::string config = Slurp(std::string(DTRAIN_SOURCE_DIR) + "/deploy/prometheus/prometheus.yml");
    // The deploy config, pointed at this run's list and scraping every second.
    const int replaced = absl::StrReplaceAll({{"- /tmp/dtrain-targets.json", "- " + targets_file_}}, &config) +
                         absl::StrReplaceAll({{"scrape_interval: 5s", "scrape_interval: 1s"}}, &config);
    if (replaced != 2) {
      setup_error_ = "deploy/prometheus/prometheus.yml no longer has the lines this test rewrites";
      return;
    }
    std::ofstream(dir_ + "/prometheus.yml") << config;
    prometheus_port_ = FreePort();
    prometheus_ = std::make_unique<Subprocess>(std::vector<std::string>{
        kPrometheus, "--config.file=" + dir_ + "/prometheus.yml", "--storage.tsdb.path=" + dir_ + "/tsdb",
        absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port_), "--log.level=warn"});
  }

  static void TearDownTestSuite() {
    for (auto* p : {&launch_, &prometheus_}) {
      if (*p == nullptr) continue;
      (*p)->Signal(SIGTERM);
      if ((*p)->Wait(absl::Seconds(30)) < 0) (*p)->Signal(SIGKILL);
      p->reset();
    }
    std::filesystem::remove_all(dir_);
  }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  // The endpoint's page once its role's metrics are there (a node exports nothing
  // until it has its rank), parsed.
  static Exposition ScrapeReady(const Target& t) {
    const std::string needle = Required().at(t.role).front();
    const absl::Time deadline = absl::Now() + kReady;
    std::string last;
    while (absl::Now() < deadline) {
      auto r = HttpGet(t.port, "/metrics");
      if (r.ok() && r->status == 200 && absl::StrContains(r->body, needle)) {
        auto parsed = ParseExposition(r->body);
        EXPECT_TRUE(parsed.ok()) << t.role << " " << t.rank << ": " << parsed.status();
        return parsed.ok() ? *parsed : Exposition();
      }
      last = r.ok() ? r->body : std::string(r.status().message());
      absl::SleepFor(absl::Milliseconds(200));
    }
    ADD_FAILURE() << t.role << " " << t.rank << " never exported " << needle << "; last answer: " << last;
    return Exposition();
  }

  static double WorkerSamples(const Exposition& e) {
    auto s = e.Find("dtrain_worker_samples_total");
    return s.empty() ? -1 : s[0].value;
  }

  static inline std::string dir_;
  static inline std::string targets_file_;
  static inline std::string setup_error_;
  static inline std::string scheduler_;
  static inline std::vector<Target> targets_;
  static inline int prometheus_port_ = 0;
  static inline std::unique_ptr<Subprocess> launch_;
  static inline std::unique_ptr<Subprocess> prometheus_;
};

TEST_F(ObservedRunTest, LaunchPrintsEveryProcesssMetricsAddress) {
  const std::string out = launch_->output();
  for (const char* who : {"scheduler", "server 0", "worker 0", "worker 1"}) {
    EXPECT_TRUE(absl::StrContains(out, absl::StrCat("metrics: ", who, " at http://127.0.0.1:"))) << who << "\n" << out;
  }
  ASSERT_EQ(targets_.size(), 4u) << Slurp(targets_file_);
  EXPECT_FALSE(scheduler_.empty()) << out;
}

TEST_F(ObservedRunTest, EveryEndpointParsesWithItsRolesMetricsLabelsAndMonotoneCounters) {
  ASSERT_EQ(targets_.size(), 4u);
  std::map<int, Exposition> first;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const Target& t = targets_[i];
    first[i] = ScrapeReady(t);
    const Exposition& e = first[i];
    for (const std::string& name : Required().at(t.role)) {
      EXPECT_FALSE(e.Find(name).empty()) << t.role << " " << t.rank << " lacks " << name;
    }
    // Every process: its build, and Prometheus' standard process series.
    for (const char* name : {"dtrain_build_info", "process_cpu_seconds_total", "process_resident_memory_bytes",
                             "process_start_time_seconds", "process_open_fds"}) {
      EXPECT_EQ(e.Find(name).size(), 1u) << t.role << " " << t.rank << " lacks " << name;
    }
    // "encoding": wire or float32 (gradient compression's bytes per step), two values;
    // "version", "commit": dtrain_build_info's, one value per process.
    static const std::set<std::string> kLabels = {"role",  "rank", "phase",    "node_role", "state",
                                                  "group", "le",   "encoding", "version",   "commit"};
    for (const Sample& s : e.samples) {
      if (!absl::StartsWith(s.name, "dtrain_")) continue;
      EXPECT_EQ(s.labels.count("role") ? s.labels.at("role") : "", t.role) << s.name;
      EXPECT_EQ(s.labels.count("rank") ? s.labels.at("rank") : "", std::to_string(t.rank)) << s.name;
      for (const auto& [k, v] : s.labels) EXPECT_TRUE(kLabels.count(k) > 0) << s.name << " has label " << k;
    }
  }
  // Again once the workers have trained more: no counter may have gone down.
  const absl::Time deadline = absl::Now() + kReady;
  std::map<int, Exposition> second;
  bool grew = false;
  while (!grew && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
    grew = true;
    for (size_t i = 0; i < targets_.size(); ++i) {
      second[i] = ScrapeReady(targets_[i]);
      if (targets_[i].role == "worker") grew = grew && WorkerSamples(second[i]) > WorkerSamples(first[i]);
    }
  }
  ASSERT_TRUE(grew) << "dtrain_worker_samples_total did not grow";
  for (size_t i = 0; i < targets_.size(); ++i) {
    for (const Sample& before : first[i].samples) {
      const std::string family = first[i].FamilyOf(before.name);
      const std::string type = first[i].types.count(family) ? first[i].types.at(family) : "";
      if (!absl::StartsWith(before.name, "dtrain_") || (type != "counter" && type != "histogram")) continue;
      auto after = second[i].Find(before.name, before.labels);
      ASSERT_EQ(after.size(), 1u) << before.name;
      EXPECT_GE(after[0].value, before.value) << before.name << " went down";
    }
  }
}

TEST_F(ObservedRunTest, StatusListsEveryNodeWithItsStep) {
  ASSERT_FALSE(scheduler_.empty());
  const absl::Time deadline = absl::Now() + kReady;
  std::string out;
  bool stepping = false;
  while (!stepping && absl::Now() < deadline) {
    auto [code, text] = RunToEnd({Bin("dtrain"), "status", "--scheduler", scheduler_}, absl::Seconds(20));
    ASSERT_EQ(code, 0) << text;
    out = text;
    // Each worker line: "worker  R  ADDRESS  ALIVE  INC  RESTARTS  STEP ...", with a step past 0.
    int moving = 0;
    for (const std::string& rank : {"0", "1"}) {
      const size_t at = out.find("worker     " + rank);
      if (at == std::string::npos) continue;
      std::istringstream line(out.substr(at, out.find('\n', at) - at));
      std::string role, r, address, state, incarnation, restarts;
      int64_t step = 0;
      if (line >> role >> r >> address >> state >> incarnation >> restarts >> step && state == "ALIVE" && step > 0) {
        ++moving;
      }
    }
    stepping = moving == 2;
    if (!stepping) absl::SleepFor(absl::Milliseconds(500));
  }
  EXPECT_TRUE(stepping) << out;
  EXPECT_TRUE(absl::StrContains(out, "server     0")) << out;
  EXPECT_TRUE(absl::StrContains(out, "workers: steps")) << out;

  // The lag compares steps sampled at one tick; in dist_sync no worker can
  // be more than one step ahead (sampled a second apart they looked ~20 apart).
  int sampled = 0;
  for (int i = 0; i < 10 && sampled < 3; ++i) {
    auto [lag_code, text] = RunToEnd({Bin("dtrain"), "status", "--scheduler", scheduler_}, absl::Seconds(20));
    ASSERT_EQ(lag_code, 0) << text;
    const size_t at = text.find("s ago (lag ");
    if (at != std::string::npos) {
      int64_t lag = -1;
      ASSERT_TRUE(absl::SimpleAtoi(text.substr(at + 11, text.find(')', at) - at - 11), &lag)) << text;
      EXPECT_LE(lag, 1) << text;
      ++sampled;
    }
    absl::SleepFor(absl::Milliseconds(700));
  }
  EXPECT_GE(sampled, 1) << "dtrain status never showed a sampled lag";

  auto [code, watched] =
      RunToEnd({Bin("dtrain"), "status", "--scheduler", scheduler_, "--watch", "--interval", "0.2", "--count", "2"},
               absl::Seconds(20));
  EXPECT_EQ(code, 0) << watched;
  size_t tables = 0;
  for (size_t at = watched.find("job at "); at != std::string::npos; at = watched.find("job at ", at + 1)) ++tables;
  EXPECT_EQ(tables, 2u) << watched;
}

TEST_F(ObservedRunTest, PrometheusHasSeriesForEveryRoleAndRankAndSamplesGrow) {
  ASSERT_EQ(::access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: install Debian's prometheus package (deploy/install-deps.sh does)";
  ASSERT_NE(prometheus_, nullptr);
  auto query = [](const std::string& q) -> nlohmann::json {
    auto r = HttpGet(prometheus_port_, "/api/v1/query?query=" + UrlEncode(q));
    if (!r.ok() || r->status != 200) return nlohmann::json();
    nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    return j.is_object() && j["status"] == "success" ? j["data"]["result"] : nlohmann::json();
  };
  const std::set<std::string> want = {"scheduler/0", "server/0", "worker/0", "worker/1"};
  std::set<std::string> have;
  absl::Time deadline = absl::Now() + kReady;
  while (have != want && absl::Now() < deadline) {
    have.clear();
    for (const auto& series : query(R"(count by (role, rank) ({__name__=~"dtrain_.+"}))")) {
      have.insert(absl::StrCat(series["metric"].value("role", "?"), "/", series["metric"].value("rank", "?")));
    }
    if (have != want) absl::SleepFor(absl::Milliseconds(500));
  }
  EXPECT_EQ(have, want) << "Prometheus log:\n" << prometheus_->output();

  // Two scrapes of each worker, the later with more samples.
  std::set<std::string> grew;
  deadline = absl::Now() + kReady;
  while (grew.size() < 2 && absl::Now() < deadline) {
    for (const auto& series : query("dtrain_worker_samples_total[1m]")) {
      const auto& values = series["values"];
      if (values.size() < 2) continue;
      double first = 0, last = 0;
      absl::SimpleAtod(values.front()[1].get<std::string>(), &first);
      absl::SimpleAtod(values.back()[1].get<std::string>(), &last);
      if (last > first) grew.insert(series["metric"].value("rank", "?"));
    }
    if (grew.size() < 2) absl::SleepFor(absl::Milliseconds(500));
  }
  EXPECT_EQ(grew, (std::set<std::string>{"0", "1"})) << "Prometheus log:\n" << prometheus_->output();
}

// Every query of deploy/grafana/dtrain-dashboard.json, with Grafana's variables filled
// in, is valid PromQL to the real server, and the training panels show data.
TEST_F(ObservedRunTest, DashboardQueriesRunOnPrometheus) {
  ASSERT_EQ(::access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: install Debian's prometheus package (deploy/install-deps.sh does)";
  ASSERT_NE(prometheus_, nullptr);
  const nlohmann::json dash =
      nlohmann::json::parse(Slurp(std::string(DTRAIN_SOURCE_DIR) + "/deploy/grafana/dtrain-dashboard.json"));
  std::map<std::string, std::string> exprs;  // panel title -> first query
  std::vector<std::string> all;
  for (const auto& panel : dash["panels"]) {
    for (const auto& target : panel.value("targets", nlohmann::json::array())) {
      std::string e = target["expr"];
      absl::StrReplaceAll({{"$job", ".*"}, {"$rank", ".*"}, {"$__rate_interval", "30s"}}, &e);
      if (exprs.count(panel["title"]) == 0) exprs[panel["title"]] = e;
      all.push_back(e);
    }
  }
  ASSERT_GT(all.size(), 20u);
  for (const std::string& e : all) {
    auto r = HttpGet(prometheus_port_, "/api/v1/query?query=" + UrlEncode(e));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 200) << e << "\n" << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "\"status\":\"success\"")) << e << "\n" << r->body;
  }
  for (const char* title :
       {"Throughput per rank", "Training loss", "Where a step's time goes", "Sync wait for the last worker",
        "Worker steps (slowest, fastest)", "Push / pull bytes per rank", "Nodes by state"}) {
    ASSERT_TRUE(exprs.count(title) > 0) << "no panel \"" << title << "\"";
    const absl::Time deadline = absl::Now() + kReady;
    bool data = false;
    while (!data && absl::Now() < deadline) {
      auto r = HttpGet(prometheus_port_, "/api/v1/query?query=" + UrlEncode(exprs[title]));
      data = r.ok() && absl::StrContains(r->body, "\"value\":[") && !absl::StrContains(r->body, "\"NaN\"");
      if (!data) absl::SleepFor(absl::Milliseconds(500));
    }
    EXPECT_TRUE(data) << title << ": no data for " << exprs[title];
  }
}

}  // namespace
}  // namespace dtrain::testing
