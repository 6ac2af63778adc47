// Recovery without the launcher: the scheduler, 2 servers and 2 workers started by hand
// (ps-lite's variables), worker 1 SIGKILLed mid-epoch and
//   - started again by hand with its rank: the job ends bit-identical to an
//     uninterrupted run, every process exiting 0;
//   - not started again: the others end within --rejoin-timeout (not the sync
//     timeout), naming worker 1, and exit non-zero.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/free_port.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);
using Env = std::map<std::string, std::string>;

// One hand-launched job: every process its own Subprocess, as a shell would start them.
class HandJob {
 public:
  explicit HandJob(const Env& extra_env) {
    env_ = {{"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT", std::to_string(FreePort())},
            {"DMLC_NUM_WORKER", "2"},          {"DMLC_NUM_SERVER", "2"},
            {"DTRAIN_BIND_HOST", "127.0.0.1"}, {"DTRAIN_ROLE", ""}};
    for (auto& [k, v] : extra_env) env_[k] = v;
    prefix_ = MakeTempDir() + "/m";
    scheduler_ = Start("scheduler", -1);
    servers_.push_back(Start("server", -1));
    servers_.push_back(Start("server", -1));
    workers_.push_back(Start("worker", 0));
    workers_.push_back(Start("worker", 1));
  }

  std::unique_ptr<Subprocess> Start(const std::string& role, int worker_rank) {
    auto env = env_;
    env["DMLC_ROLE"] = role;
    std::vector<std::string> argv = {Bin("dtrain"), "run"};
    if (worker_rank >= 0) {
      env["DMLC_WORKER_ID"] = std::to_string(worker_rank);
      for (const char* f : {"--kv-store", "dist_sync", "--network", "lenet", "--num-epochs", "1", "--num-examples",
                            "3000", "--num-test-examples", "500", "--seed", "5", "--disp-batches", "1"}) {
        argv.push_back(f);
      }
      // Only worker 0 writes; the flag is the same for both, as a shell loop would give it.
      argv.push_back("--model-prefix");
      argv.push_back(prefix_);
    }
    return std::make_unique<Subprocess>(argv, env);
  }

  std::unique_ptr<Subprocess> scheduler_;
  std::vector<std::unique_ptr<Subprocess>> servers_;
  std::vector<std::unique_ptr<Subprocess>> workers_;

 private:
  std::map<std::string, std::string> env_;
  std::string prefix_;
};

std::string FinalWeightsOf(Subprocess& p) {
  const std::vector<std::string> w = FinalWeights(p.output());
  return w.size() == 1 ? w[0] : "";
}

TEST(HandRestartTest, WorkerRestartedByHandRejoinsAndTheJobEndsBitIdentical) {
  std::string ref;
  {
    HandJob job(Env{});
    for (auto& w : job.workers_) ASSERT_EQ(w->Wait(kRunTimeout), 0) << w->output();
    ref = FinalWeightsOf(*job.workers_[0]);
    ASSERT_FALSE(ref.empty()) << job.workers_[0]->output();
    ASSERT_EQ(FinalWeightsOf(*job.workers_[1]), ref);
    ASSERT_EQ(job.scheduler_->Wait(absl::Seconds(30)), 0) << job.scheduler_->output();
  }
  HandJob job(Env{{"DTRAIN_REJOIN_TIMEOUT", "60"}});
  ASSERT_NE(WaitForLine(*job.workers_[1], "", "Epoch[0] Batch [8]", absl::Minutes(3)), std::string::npos)
      << job.workers_[1]->output();
  job.workers_[1]->Signal(SIGKILL);
  EXPECT_EQ(job.workers_[1]->Wait(absl::Seconds(10)), 128 + SIGKILL);
  // As an operator would: the same command, the same rank.
  auto replacement = job.Start("worker", 1);
  ASSERT_EQ(replacement->Wait(kRunTimeout), 0) << replacement->output();
  EXPECT_NE(replacement->output().find("redoing step"), std::string::npos) << replacement->output();
  EXPECT_EQ(FinalWeightsOf(*replacement), ref) << replacement->output();
  ASSERT_EQ(job.workers_[0]->Wait(kRunTimeout), 0) << job.workers_[0]->output();
  EXPECT_EQ(FinalWeightsOf(*job.workers_[0]), ref) << job.workers_[0]->output();
  for (auto& s : job.servers_) EXPECT_EQ(s->Wait(absl::Seconds(30)), 0) << s->output();
  EXPECT_EQ(job.scheduler_->Wait(absl::Seconds(30)), 0) << job.scheduler_->output();
}

TEST(HandRestartTest, WorkerNotRestartedEndsTheJobWithinTheRejoinTimeoutNamingIt) {
  // The sync timeout is far longer than the rejoin timeout: ending before it shows the
  // rejoin timeout is what ended the job.
  HandJob job(Env{{"DTRAIN_REJOIN_TIMEOUT", "4"}, {"DTRAIN_SYNC_TIMEOUT", "300"}});
  ASSERT_NE(WaitForLine(*job.workers_[1], "", "Epoch[0] Batch [5]", absl::Minutes(3)), std::string::npos)
      << job.workers_[1]->output();
  job.workers_[1]->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  const int code = job.workers_[0]->Wait(absl::Seconds(60));
  const double took = absl::ToDoubleSeconds(absl::Now() - killed);
  const std::string& out = job.workers_[0]->output();
  ASSERT_NE(code, -1) << "worker 0 still runs 60 s after worker 1 died:\n" << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_LT(took, 30) << out;
  EXPECT_NE(out.find("worker 1"), std::string::npos) << out;
  EXPECT_NE(out.find("did not rejoin within"), std::string::npos) << out;
  for (auto& s : job.servers_) EXPECT_NE(s->Wait(absl::Seconds(30)), -1) << s->output();
  EXPECT_NE(job.scheduler_->Wait(absl::Seconds(30)), 0) << job.scheduler_->output();
}

}  // namespace
}  // namespace dtrain::testing
