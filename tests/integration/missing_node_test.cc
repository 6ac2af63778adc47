// "Never hang silently": a node that never comes, or dies mid-run, produces an error
// that names it, within the configured deadline.
#include <signal.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

struct Cluster {
  std::string dir = MakeTempDir();
  ~Cluster() { std::filesystem::remove_all(dir); }
  std::unique_ptr<Subprocess> scheduler;
  std::string address;

  std::map<std::string, std::string> Env(int rank) const {
    return {{"DTRAIN_SCHEDULER_ADDR", address},
            {"DTRAIN_NUM_WORKERS", "2"},
            {"DTRAIN_NUM_SERVERS", "1"},
            {"DTRAIN_RANK", std::to_string(rank)},
            {"DTRAIN_NODE_HOST", "127.0.0.1"}};
  }
  void StartScheduler(const std::string& register_timeout) {
    scheduler = std::make_unique<Subprocess>(
        std::vector<std::string>{Bin("dtrain-scheduler"), "--port", "0", "--port-file", dir + "/port", "--num-workers",
                                 "2", "--num-servers", "1", "--register-timeout", register_timeout});
    for (int i = 0; i < 200 && address.empty(); ++i) {
      FILE* f = std::fopen((dir + "/port").c_str(), "r");
      int port = 0;
      if (f != nullptr) {
        if (std::fscanf(f, "%d", &port) == 1) address = absl::StrCat("127.0.0.1:", port);
        std::fclose(f);
      }
      if (address.empty()) absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_FALSE(address.empty()) << scheduler->output();
  }
};

TEST(MissingNodeTest, WorkerThatNeverRegistersIsNamed) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.StartScheduler("4"));
  Subprocess server({Bin("dtrain-server")}, c.Env(0));
  const absl::Time start = absl::Now();
  Subprocess worker0({Bin("dtrain-worker"), "--kv-store", "dist_sync", "--register-timeout", "4"}, c.Env(0));
  const int code = worker0.Wait(absl::Seconds(30));
  const double took = absl::ToDoubleSeconds(absl::Now() - start);
  EXPECT_NE(code, 0) << worker0.output();
  EXPECT_NE(code, -1) << "worker 0 hung: " << worker0.output();
  EXPECT_LT(took, 15) << worker0.output();
  EXPECT_NE(worker0.output().find("worker"), std::string::npos);
  EXPECT_NE(worker0.output().find("rank 1"), std::string::npos) << worker0.output();
}

// With --rejoin-timeout 0 (the default) a worker's death ends the others' step as soon as
// the scheduler reports it, well before the 4 s sync timeout, naming the dead worker.
TEST(MissingNodeTest, WorkerDyingMidRunIsNamedAtOnce) {
  Cluster c;
  ASSERT_NO_FATAL_FAILURE(c.StartScheduler("30"));
  Subprocess server({Bin("dtrain-server")}, c.Env(0));
  const std::vector<std::string> flags = {"--kv-store",     "dist_sync", "--network",      "mlp",
                                          "--num-examples", "60000",     "--disp-batches", "20",
                                          "--sync-timeout", "4",         "--threads",      "1"};
  auto argv = [&] {
    std::vector<std::string> a = {Bin("dtrain-worker")};
    a.insert(a.end(), flags.begin(), flags.end());
    return a;
  };
  Subprocess worker0(argv(), c.Env(0));
  Subprocess worker1(argv(), c.Env(1));
  ASSERT_TRUE(worker1.WaitForOutput("Epoch[0] Batch [20]", absl::Seconds(60))) << worker1.output();
  worker1.Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  const int code = worker0.Wait(absl::Seconds(30));
  EXPECT_NE(code, -1) << "worker 0 hung: " << worker0.output();
  EXPECT_NE(code, 0) << worker0.output();
  EXPECT_LT(absl::ToDoubleSeconds(absl::Now() - killed), 15);
  EXPECT_NE(worker0.output().find("worker 1 died"), std::string::npos) << worker0.output();
  EXPECT_NE(worker0.output().find("--rejoin-timeout is 0"), std::string::npos) << worker0.output();
}

}  // namespace
}  // namespace dtrain::testing
