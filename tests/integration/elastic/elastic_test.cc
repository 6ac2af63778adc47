// Elastic workers (docs/elastic.md) with the real binaries: a worker joins a running
// dist_sync job with no rank, another leaves on SIGTERM, a SIGKILLed one is dropped
// after the rejoin timeout; the recorded membership replays to the same weights, bit
// for bit; bad settings are refused before anything starts.
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/elastic/membership_file.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic/elastic_job.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

ElasticJobOptions Options(int workers, std::vector<std::string> scheduler_flags,
                          std::map<std::string, std::string> env) {
  ElasticJobOptions o;
  o.workers = workers;
  o.scheduler_flags = std::move(scheduler_flags);
  o.env = std::move(env);
  return o;
}

constexpr absl::Duration kRunTimeout = absl::Minutes(5);

std::string FinalWeightsOf(Subprocess& p) {
  const std::vector<std::string> w = FinalWeights(p.output());
  return w.size() == 1 ? w[0] : "";
}

bool Has(Subprocess& p, const std::string& text) { return p.output().find(text) != std::string::npos; }

// The samples of epoch `epoch`'s job-wide line ("Epoch[1] Job: 2 workers at its end ...
// 2944 samples"), or -1 when `p` printed none.
int64_t JobLineSamples(Subprocess& p, int epoch) {
  const std::string head = absl::StrCat("Epoch[", epoch, "] Job: ");
  const size_t at = p.output().find(head);
  if (at == std::string::npos) return -1;
  const size_t end = p.output().find('\n', at);
  const std::string line = p.output().substr(at, end - at);
  const size_t samples = line.find(" samples\t");
  if (samples == std::string::npos) return -1;
  const size_t tab = line.rfind('\t', samples);
  return std::stoll(line.substr(tab + 1, samples - tab - 1));
}

// Every process of `job` ends with 0; the workers still in the job agree on the weights,
// which are returned.
std::string EndsCleanly(ElasticJob& job, const std::vector<int>& finishers) {
  std::string weights;
  for (int w : finishers) {
    EXPECT_EQ(job.worker(w).Wait(kRunTimeout), 0) << job.worker(w).output();
    const std::string mine = FinalWeightsOf(job.worker(w));
    EXPECT_FALSE(mine.empty()) << job.worker(w).output();
    if (weights.empty()) weights = mine;
    EXPECT_EQ(mine, weights) << "worker " << w << " disagrees:\n" << job.worker(w).output();
  }
  for (auto& s : job.servers()) EXPECT_EQ(s->Wait(absl::Seconds(30)), 0) << s->output();
  EXPECT_EQ(job.scheduler().Wait(absl::Seconds(30)), 0) << job.scheduler().output();
  return weights;
}

// 2 workers; a third joins mid-epoch; worker 1 leaves on SIGTERM; the job ends with
// workers 0 and 2. Then the same job replayed from the recorded schedule, with the
// joiner started at once and the SIGTERM sent at once: the same weights, bit for bit.
TEST(ElasticTest, JoinAndSigtermLeaveThenTheRecordedScheduleReplaysBitIdentical) {
  std::string recorded_weights;
  std::string recorded;
  {
    ElasticJob job(Options(2, {}, {}));
    ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Batch [4]", absl::Minutes(3)), std::string::npos)
        << job.worker(0).output();
    Subprocess& joiner = job.AddJoiner();
    ASSERT_TRUE(job.scheduler().WaitForOutput("joined at step", absl::Minutes(2)))
        << job.scheduler().output() << joiner.output();
    ASSERT_TRUE(joiner.WaitForOutput("Epoch[", absl::Minutes(2))) << joiner.output();
    job.worker(1).Signal(SIGTERM);
    EXPECT_EQ(job.worker(1).Wait(absl::Minutes(2)), 0) << job.worker(1).output();
    EXPECT_TRUE(Has(job.worker(1), "left the job at step")) << job.worker(1).output();
    recorded_weights = EndsCleanly(job, {0, 2});
    ASSERT_FALSE(recorded_weights.empty());
    // Every example of each epoch trained once, whoever took it: at most the last partial
    // batch of each worker is left (3000 examples, batches of 64, up to 3 workers).
    for (int epoch = 0; epoch < 2; ++epoch) {
      const int64_t samples = JobLineSamples(job.worker(0), epoch);
      EXPECT_GT(samples, 3000 - 3 * 64) << "epoch " << epoch << ":\n" << job.worker(0).output();
      EXPECT_LE(samples, 3000) << "epoch " << epoch;
    }
    EXPECT_TRUE(Has(job.scheduler(), "3 workers from now")) << job.scheduler().output();
    EXPECT_TRUE(Has(job.scheduler(), "worker 1 left at step")) << job.scheduler().output();
    auto schedule = elastic::ReadMembershipFile(job.prefix() + "-membership.json");
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    ASSERT_EQ(schedule->generations().size(), 3u) << elastic::MembershipToJson(*schedule);
    EXPECT_EQ(schedule->generations()[1].ranks, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(schedule->generations()[2].ranks, (std::vector<int>{0, 2}));
    recorded = MakeTempDir() + "/recorded-membership.json";
    ASSERT_TRUE(elastic::WriteMembershipFile(recorded, *schedule).ok());
  }
  ElasticJob replay(Options(2, {"--replay-membership", recorded}, {}));
  ASSERT_NE(WaitForLine(replay.worker(0), "", "Epoch[0] Batch [1]", absl::Minutes(3)), std::string::npos)
      << replay.worker(0).output();
  Subprocess& joiner = replay.AddJoiner();
  ASSERT_TRUE(replay.scheduler().WaitForOutput("joined at step", absl::Minutes(2))) << replay.scheduler().output();
  replay.worker(1).Signal(SIGTERM);
  EXPECT_EQ(replay.worker(1).Wait(absl::Minutes(2)), 0) << replay.worker(1).output();
  EXPECT_EQ(EndsCleanly(replay, {0, 2}), recorded_weights) << joiner.output();
}

// The scheduler SIGKILLed after a join and started again: it takes up the generation the
// servers committed, then a SIGTERM leave goes on as before; the job ends cleanly with
// workers 0 and 2 and the restarted scheduler's file holds all three generations.
TEST(ElasticTest, ARestartedSchedulerTakesUpTheMembershipTheServersHold) {
  ElasticJob job(Options(2, {}, {}));
  ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Batch [4]", absl::Minutes(3)), std::string::npos)
      << job.worker(0).output();
  Subprocess& joiner = job.AddJoiner();
  ASSERT_TRUE(job.scheduler().WaitForOutput("joined at step", absl::Minutes(2))) << job.scheduler().output();
  ASSERT_TRUE(joiner.WaitForOutput("joins at step", absl::Minutes(2))) << joiner.output();
  job.RestartScheduler();
  ASSERT_TRUE(job.scheduler().WaitForOutput("(taken up from the servers)", absl::Minutes(1)))
      << job.scheduler().output();
  job.worker(1).Signal(SIGTERM);
  EXPECT_EQ(job.worker(1).Wait(absl::Minutes(2)), 0) << job.worker(1).output();
  EndsCleanly(job, {0, 2});
  EXPECT_TRUE(Has(job.scheduler(), "worker 1 left at step")) << job.scheduler().output();
  auto schedule = elastic::ReadMembershipFile(job.prefix() + "-membership.json");
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  ASSERT_EQ(schedule->generations().size(), 3u) << elastic::MembershipToJson(*schedule);
  EXPECT_EQ(schedule->generations()[2].ranks, (std::vector<int>{0, 2}));
}

// 3 workers, MIN 2: worker 2 SIGKILLed and not restarted is dropped after the rejoin
// timeout and the job ends with the other two; the sync timeout is far longer, so the
// end shows the drop is what let the job go on. Where the kill lands decides how: in
// the middle of its pushes some keys merged its step and others wait for it, and only
// the rollback to the servers' snapshots takes that step back (docs/elastic.md), so the
// servers snapshot; otherwise the survivors redo the step without it.
TEST(ElasticTest, AKilledWorkerNotRestartedIsDroppedAfterTheRejoinTimeout) {
  ElasticJob job(Options(3, {},
                         {{"DTRAIN_REJOIN_TIMEOUT", "3"},
                          {"DTRAIN_SYNC_TIMEOUT", "300"},
                          {"DTRAIN_SNAPSHOT_EVERY", "4"},
                          {"DTRAIN_SNAPSHOT_DIR", MakeTempDir()}}));
  // Past the servers' first snapshot (step 4): wherever the kill lands, the step can be
  // taken back.
  ASSERT_NE(WaitForLine(job.worker(2), "", "Epoch[0] Batch [7]", absl::Minutes(3)), std::string::npos)
      << job.worker(2).output();
  job.worker(2).Signal(SIGKILL);
  EXPECT_EQ(job.worker(2).Wait(absl::Seconds(10)), 128 + SIGKILL);
  EndsCleanly(job, {0, 1});
  EXPECT_TRUE(Has(job.scheduler(), "2 workers from now")) << job.scheduler().output();
  // Which way it went (seen in the test's log; both end the same).
  std::cout << "worker 2's removal: "
            << (Has(*job.servers()[0], "rolled back to step") ? "rolled back to the servers' snapshot"
                                                              : "its pending step dropped")
            << std::endl;
}

// MIN 2 of 2: a worker killed and not restarted fails the job after the rejoin timeout,
// naming it, as a job that is not elastic does.
TEST(ElasticTest, ShrinkingBelowMinFailsNamingTheWorker) {
  ElasticJob job(Options(2, {}, {{"DTRAIN_REJOIN_TIMEOUT", "3"}, {"DTRAIN_SYNC_TIMEOUT", "300"}}));
  ASSERT_NE(WaitForLine(job.worker(1), "", "Epoch[0] Batch [3]", absl::Minutes(3)), std::string::npos)
      << job.worker(1).output();
  job.worker(1).Signal(SIGKILL);
  const int code = job.worker(0).Wait(absl::Seconds(60));
  ASSERT_NE(code, -1) << "worker 0 still runs 60 s after worker 1 died:\n" << job.worker(0).output();
  EXPECT_NE(code, 0);
  EXPECT_TRUE(Has(job.worker(0), "worker 1")) << job.worker(0).output();
  EXPECT_NE(job.scheduler().Wait(absl::Seconds(30)), 0) << job.scheduler().output();
}

// --lr-step-epochs in an elastic job: the servers find each step's epoch from the
// membership. With no change the epochs are the fixed job's, and so are the weights.
TEST(ElasticTest, TheLrScheduleOfAnElasticJobWithNoChangeIsTheFixedJobs) {
  std::vector<std::string> weights;
  for (bool elastic : {false, true}) {
    std::vector<std::string> argv = {Bin("dtrain"), "launch", "-n", "2", "-s", "2"};
    if (elastic) argv.insert(argv.end(), {"--elastic", "2:3"});
    for (const char* f : {"--", "--network", "lenet", "--num-epochs", "2", "--num-examples", "2000",
                          "--num-test-examples", "200", "--seed", "7", "--lr-step-epochs", "1", "--lr-factor", "0.3"}) {
      argv.push_back(f);
    }
    Subprocess job(argv, {{"DTRAIN_ROLE", ""}, {"DTRAIN_ELASTIC", ""}});
    ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
    const std::vector<std::string> w = FinalWeights(job.output());
    ASSERT_EQ(w.size(), 2u) << job.output();
    EXPECT_EQ(w[0], w[1]);
    weights.push_back(w[0]);
  }
  EXPECT_EQ(weights[0], weights[1]);
}

// Bad settings: each refused at once, naming what is wrong; nothing starts.
TEST(ElasticTest, BadSettingsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> argv;
    std::string expected;
  };
  const std::string garbage = MakeTempDir() + "/garbage.json";
  ASSERT_TRUE(elastic::WriteMembershipFile(garbage, elastic::MembershipSchedule::Fixed(2)).ok());
  {
    // Not JSON from the second line on.
    FILE* f = std::fopen(garbage.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("{\"format\": \"dtrain-membership-1\",\n  \"generations\": [oops]}\n", f);
    std::fclose(f);
  }
  const std::vector<Case> cases = {
      {{Bin("dtrain-scheduler"), "--num-workers", "2", "--elastic", "3:2"}, "MIN 3 is above MAX 2"},
      {{Bin("dtrain-scheduler"), "--num-workers", "5", "--elastic", "2:4"}, "is above --elastic 2:4's MAX 4"},
      {{Bin("dtrain-scheduler"), "--num-workers", "2", "--elastic", "2:4", "--replay-membership", garbage}, "line 2"},
      {{Bin("dtrain-scheduler"), "--num-workers", "2", "--elastic", "2:4", "--kv-store", "dist_async"},
       "needs --kv-store dist_sync"},
  };
  for (const Case& c : cases) {
    Subprocess p(c.argv, {{"DTRAIN_ROLE", ""}, {"DTRAIN_ELASTIC", ""}});
    const int code = p.Wait(absl::Seconds(20));
    EXPECT_NE(code, 0) << p.output();
    EXPECT_NE(code, -1) << "still running: " << p.output();
    EXPECT_TRUE(Has(p, c.expected)) << "expected \"" << c.expected << "\" in:\n" << p.output();
  }
}

}  // namespace
}  // namespace dtrain::testing
