// The pieces of `dtrain status` and `dtrain plot` that need no process: the table and
// the gnuplot program.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/launcher/plot_script.h"
#include "services/launcher/status_table.h"

namespace dtrain::launcher {
namespace {

v1::NodeInfo Node(v1::Role role, int rank, v1::NodeState state, int64_t step, double speed, int64_t heard_ms) {
  v1::NodeInfo n;
  n.set_role(role);
  n.set_rank(rank);
  n.set_address(role == v1::ROLE_SERVER ? "127.0.0.1:40123" : "127.0.0.1");
  n.set_state(state);
  n.set_last_step(step);
  n.set_samples_per_sec(speed);
  n.set_last_heard_unix_ms(heard_ms);
  return n;
}

TEST(StatusTableTest, ListsEveryNodeWithStepSpeedAndLastHeard) {
  v1::GetStatusResponse s;
  s.mutable_cluster()->set_kv_store("dist_sync");
  s.mutable_cluster()->set_num_workers(2);
  s.mutable_cluster()->set_num_servers(1);
  s.set_now_unix_ms(10000);
  *s.add_nodes() = Node(v1::ROLE_SERVER, 0, v1::NODE_STATE_ALIVE, 0, 0, 9600);
  *s.add_nodes() = Node(v1::ROLE_WORKER, 0, v1::NODE_STATE_ALIVE, 812, 1203.5, 9800);
  *s.add_nodes() = Node(v1::ROLE_WORKER, 1, v1::NODE_STATE_DEAD, 805, 1187, 1000);
  const std::string t = FormatStatus(s, "127.0.0.1:9091");
  EXPECT_TRUE(absl::StartsWith(t, "job at 127.0.0.1:9091: dist_sync, 2 workers, 1 server\n")) << t;
  EXPECT_TRUE(absl::StrContains(t, "ROLE")) << t;
  EXPECT_TRUE(absl::StrContains(t, "LAST HEARD")) << t;
  EXPECT_TRUE(absl::StrContains(t, "server     0  127.0.0.1:40123  ALIVE")) << t;
  EXPECT_TRUE(absl::StrContains(t, "812     1203.5  0.2 s ago")) << t;
  EXPECT_TRUE(absl::StrContains(t, "worker     1  127.0.0.1        DEAD")) << t;
  EXPECT_TRUE(absl::StrContains(t, "9.0 s ago")) << t;
  // The dead worker is out of the spread. Without a tick every worker reported, the
  // steps' spread is not called a lag (they are up to a heartbeat apart).
  EXPECT_TRUE(absl::StrContains(t, "workers: steps 812..812 (lag not sampled yet), 1203.5 samples/s in all")) << t;
  // With one, the lag is that tick's.
  v1::WorkerLag* lag = s.mutable_worker_lag();
  lag->set_at_unix_ms(9500);
  lag->set_steps(1);
  lag->set_slowest_step(811);
  lag->set_slowest_rank(0);
  lag->set_fastest_step(812);
  const std::string u = FormatStatus(s, "127.0.0.1:9091");
  EXPECT_TRUE(absl::StrContains(u, "workers: steps 811..812 0.5 s ago (lag 1), 1203.5 samples/s in all")) << u;
}

TEST(StatusTableTest, SaysSoWhenNobodyRegistered) {
  v1::GetStatusResponse s;
  EXPECT_TRUE(absl::StrContains(FormatStatus(s, "h:1"), "no node has registered yet"));
}

TEST(PlotScriptTest, DrawsLossAccuracyAndSpeedAgainstEpoch) {
  std::vector<metrics::EpochFigures> rows(3);
  for (int i = 0; i < 3; ++i) {
    rows[i].epoch = i;
    rows[i].train_loss = 1.0 / (i + 1);
  }
  PlotSpec spec;
  spec.data_path = "/tmp/it's.csv";
  spec.output_path = "/tmp/out.png";
  spec.terminal = "pngcairo";
  spec.title = "dtrain: m";
  const std::string script = PlotScript(spec, rows);
  EXPECT_TRUE(absl::StrContains(script, "set terminal pngcairo size 1200,900")) << script;
  EXPECT_TRUE(absl::StrContains(script, "set output '/tmp/out.png'")) << script;
  EXPECT_TRUE(absl::StrContains(script, "'/tmp/it''s.csv' using 1:2")) << script;  // quote escaped
  EXPECT_TRUE(absl::StrContains(script, "using 1:4 title 'validation'")) << script;
  EXPECT_TRUE(absl::StrContains(script, "using 1:5 title 'worker 0'")) << script;
  EXPECT_TRUE(absl::StrContains(script, "set xrange [0:2]")) << script;
  EXPECT_EQ(PlotData(rows).substr(0, 2), "0,");

  spec.format = ImageFormat::kSvg;
  spec.terminal = "svg";
  rows.resize(1);
  const std::string svg = PlotScript(spec, rows);
  EXPECT_TRUE(absl::StrContains(svg, "set terminal svg size 1200,900 fixed")) << svg;
  EXPECT_TRUE(absl::StrContains(svg, "set xrange [-0.5:0.5]")) << svg;
}

}  // namespace
}  // namespace dtrain::launcher
