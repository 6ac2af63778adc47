// Elastic workers (docs/elastic.md) meeting the other faults and events of a job, with
// the real binaries: a join while worker 0 writes its epoch checkpoint, a join and a
// leave while a server fails over (and the recorded membership replayed without the
// failure, bit for bit), and joiners that do not belong to the job (another job id,
// another model), which are refused without hurting it.
#include <signal.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/elastic/membership_file.h"
#include "gtest/gtest.h"
#include "tests/integration/elastic/elastic_job.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);
constexpr absl::Duration kLineTimeout = absl::Minutes(2);

bool Has(Subprocess& p, const std::string& text) { return p.output().find(text) != std::string::npos; }

std::string FinalWeightsOf(Subprocess& p) {
  const std::vector<std::string> w = FinalWeights(p.output());
  return w.size() == 1 ? w[0] : "";
}

// Every process of `job` ends with 0; the workers `finishers` agree on the weights,
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

// The schedule the scheduler wrote (an empty one, after a test failure, when unreadable).
elastic::MembershipSchedule RecordedSchedule(ElasticJob& job) {
  auto schedule = elastic::ReadMembershipFile(job.prefix() + "-membership.json");
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  return schedule.ok() ? *std::move(schedule) : elastic::MembershipSchedule::Fixed(0);
}

// The first line of `p`'s output holding `text` ("" when none), for the test's log.
std::string LineWith(Subprocess& p, const std::string& text) {
  const std::string& out = p.output();
  const size_t at = out.find(text);
  if (at == std::string::npos) return "";
  const size_t begin = out.rfind('\n', at);
  const size_t end = out.find('\n', at);
  return out.substr(begin == std::string::npos ? 0 : begin + 1,
                    (end == std::string::npos ? out.size() : end) - (begin == std::string::npos ? 0 : begin + 1));
}

// Every epoch's checkpoint under `prefix` is there and whole (WriteFileAtomically's
// temporary files gone: a save cut short leaves one).
void ExpectCompleteCheckpoints(const std::string& dir, const std::string& prefix, int epochs) {
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    for (const char* kind : {"params", "states"}) {
      const std::string path = absl::StrFormat("%s-%04d.%s", prefix, epoch, kind);
      ASSERT_TRUE(std::filesystem::exists(path)) << path;
      EXPECT_GT(std::filesystem::file_size(path), 0u) << path;
    }
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_FALSE(absl::StrContains(entry.path().filename().string(), ".tmp")) << entry.path();
  }
}

// A joiner started the moment worker 0 ends epoch 0, i.e. while it saves that epoch's
// checkpoint (the servers' optimizer state, then the weights): the join is committed
// beside the save, the job ends cleanly on one set of weights, every epoch's
// checkpoint is complete with no temporary file left, and the file records the join.
TEST(ElasticFaultsTest, AJoinRacingWorkerZerosCheckpointSave) {
  const std::string dir = MakeTempDir();
  ElasticJobOptions o;
  o.worker_flags = {"--model-prefix", dir + "/ck"};
  ElasticJob job(o);
  ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Time cost", absl::Minutes(3)), std::string::npos)
      << job.worker(0).output();
  Subprocess& joiner = job.AddJoiner();
  ASSERT_TRUE(job.scheduler().WaitForOutput("joined at step", kLineTimeout))
      << job.scheduler().output() << joiner.output();
  EndsCleanly(job, {0, 1, 2});
  std::cout << "the join: " << LineWith(job.scheduler(), "joined at step") << std::endl;
  EXPECT_TRUE(Has(job.worker(0), "Saved checkpoint to")) << job.worker(0).output();
  ExpectCompleteCheckpoints(dir, dir + "/ck", 2);
  const elastic::MembershipSchedule schedule = RecordedSchedule(job);
  ASSERT_EQ(schedule.generations().size(), 2u) << elastic::MembershipToJson(schedule);
  EXPECT_EQ(schedule.generations()[1].ranks, (std::vector<int>{0, 1, 2}));
  // The joiner started after epoch 0's last step (23 steps of 2 workers): it joins in epoch 1.
  EXPECT_GE(schedule.generations()[1].from_step, 23) << elastic::MembershipToJson(schedule);
}

// The same race made exact: the joiner registers early and a replayed schedule holds
// its join back to step 23, the first step of epoch 1, so the servers are asked to
// commit it while worker 0 ends epoch 0 and saves its checkpoint.
TEST(ElasticFaultsTest, AJoinCommittedAtTheEpochBoundaryOfACheckpointSave) {
  const std::string dir = MakeTempDir();
  auto schedule = elastic::MembershipSchedule::Create(2, 3, {{0, {0, 1}}, {23, {0, 1, 2}}});
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  const std::string recorded = dir + "/recorded-membership.json";
  ASSERT_TRUE(elastic::WriteMembershipFile(recorded, *schedule).ok());
  ElasticJobOptions o;
  o.worker_flags = {"--model-prefix", dir + "/ck"};
  o.scheduler_flags = {"--replay-membership", recorded};
  ElasticJob job(o);
  ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Batch [1]", absl::Minutes(3)), std::string::npos)
      << job.worker(0).output();
  Subprocess& joiner = job.AddJoiner();
  ASSERT_TRUE(joiner.WaitForOutput("joins at step 23", kLineTimeout)) << joiner.output() << job.scheduler().output();
  EndsCleanly(job, {0, 1, 2});
  ExpectCompleteCheckpoints(dir, dir + "/ck", 2);
  EXPECT_EQ(RecordedSchedule(job).generations(), schedule->generations());
}

// 3 servers, each key range on 2 of them (--replication 2); rejoin timeouts long
// enough for a restarted server. 2000 examples: 15 steps an epoch with 2 workers.
ElasticJobOptions ReplicatedOptions(std::vector<std::string> scheduler_flags) {
  ElasticJobOptions o;
  o.servers = 3;
  o.examples = 2000;
  o.scheduler_flags = std::move(scheduler_flags);
  o.env = {{"DTRAIN_REPLICATION", "2"}, {"DTRAIN_REJOIN_TIMEOUT", "60"}};
  return o;
}

// A server SIGKILLed mid-epoch and started again (as `dtrain launch --max-restarts`
// would) while a joiner comes in and then worker 1 leaves on SIGTERM: the workers go
// on at the other replica, the restarted server is copied its ranges, and the job ends
// cleanly with workers 0 and 2 on one set of weights. Then the recorded membership
// replayed without the kill: recovery is exact, so the weights are the same, bit for bit.
TEST(ElasticFaultsTest, AJoinAndALeaveWhileAServerFailsOverThenTheReplayWithoutTheKill) {
  std::string recorded_weights;
  std::string recorded;
  {
    ElasticJob job(ReplicatedOptions({}));
    ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Batch [3]", absl::Minutes(3)), std::string::npos)
        << job.worker(0).output();
    // The joiner registered: the scheduler is about to propose its join to every server,
    // one of which dies now and answers only once restarted.
    Subprocess& joiner = job.AddJoiner();
    ASSERT_TRUE(joiner.WaitForOutput("joined the job", kLineTimeout)) << joiner.output();
    job.RestartServer(1);
    ASSERT_TRUE(job.worker(0).WaitForOutput("failover: server", kLineTimeout)) << job.worker(0).output();
    ASSERT_TRUE(job.scheduler().WaitForOutput("joined at step", kLineTimeout))
        << job.scheduler().output() << joiner.output();
    job.worker(1).Signal(SIGTERM);
    EXPECT_EQ(job.worker(1).Wait(kLineTimeout), 0) << job.worker(1).output();
    EXPECT_TRUE(Has(job.worker(1), "left the job at step")) << job.worker(1).output();
    recorded_weights = EndsCleanly(job, {0, 2});
    ASSERT_FALSE(recorded_weights.empty());
    // How the events fell (seen in the test's log).
    std::cout << LineWith(job.scheduler(), "joined at step") << "\n"
              << LineWith(joiner, "now (registered: ") << "\n"
              << LineWith(job.scheduler(), "left at step") << "\n";
    for (auto& s : job.servers()) std::cout << LineWith(*s, "holds every key of ours in its chains again") << "\n";
    std::cout << std::flush;
    const elastic::MembershipSchedule schedule = RecordedSchedule(job);
    ASSERT_EQ(schedule.generations().size(), 3u) << elastic::MembershipToJson(schedule);
    EXPECT_EQ(schedule.generations()[1].ranks, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(schedule.generations()[2].ranks, (std::vector<int>{0, 2}));
    recorded = MakeTempDir() + "/recorded-membership.json";
    ASSERT_TRUE(elastic::WriteMembershipFile(recorded, schedule).ok());
  }
  ElasticJob replay(ReplicatedOptions({"--replay-membership", recorded}));
  ASSERT_NE(WaitForLine(replay.worker(0), "", "Epoch[0] Batch [1]", absl::Minutes(3)), std::string::npos)
      << replay.worker(0).output();
  Subprocess& joiner = replay.AddJoiner();
  ASSERT_TRUE(replay.scheduler().WaitForOutput("joined at step", kLineTimeout)) << replay.scheduler().output();
  replay.worker(1).Signal(SIGTERM);
  EXPECT_EQ(replay.worker(1).Wait(kLineTimeout), 0) << replay.worker(1).output();
  EXPECT_EQ(EndsCleanly(replay, {0, 2}), recorded_weights) << joiner.output();
}

// A joiner of another job (DTRAIN_JOB_ID) is refused at its registration, naming both
// ids, and gets nowhere near the membership: the job ends cleanly with its two workers,
// on the weights of the same job with no joiner at all.
TEST(ElasticFaultsTest, AJoinerOfAnotherJobIsRefusedNamingBothIdsAndTheJobGoesOn) {
  ElasticJobOptions o;
  o.epochs = 1;
  o.env = {{"DTRAIN_JOB_ID", "job-faults-a"}};
  std::string reference;
  {
    ElasticJob alone(o);
    reference = EndsCleanly(alone, {0, 1});
    ASSERT_FALSE(reference.empty());
  }
  ElasticJob job(o);
  ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Batch [3]", absl::Minutes(3)), std::string::npos)
      << job.worker(0).output();
  Subprocess& stranger = job.AddJoiner({}, {{"DTRAIN_JOB_ID", "job-faults-b"}});
  const int code = stranger.Wait(kLineTimeout);
  EXPECT_NE(code, -1) << "still running:\n" << stranger.output();
  EXPECT_NE(code, 0) << stranger.output();
  EXPECT_TRUE(Has(stranger, "job 'job-faults-b', but this scheduler runs job 'job-faults-a'")) << stranger.output();
  EXPECT_EQ(EndsCleanly(job, {0, 1}), reference);
  EXPECT_EQ(RecordedSchedule(job).generations().size(), 1u);
}

// A joiner training another model (mlp where the job trains lenet) fails naming the
// mismatch, and the job goes on with its two workers. It finds the mismatch only once its
// join is committed (the scheduler commits the join at its registration, before the
// joiner has its model or has talked to a server): the scheduler removes it at once, as
// a dead joiner is removed (its join step's pending pushes dropped, the others redo it).
TEST(ElasticFaultsTest, AJoinerWithAnotherModelFailsNamingTheMismatchAndTheJobGoesOn) {
  ElasticJob job(ElasticJobOptions{});
  ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Batch [3]", absl::Minutes(3)), std::string::npos)
      << job.worker(0).output();
  Subprocess& other_model = job.AddJoiner({"--network", "mlp"});
  const int code = other_model.Wait(kLineTimeout);
  EXPECT_NE(code, -1) << "still running:\n" << other_model.output();
  EXPECT_NE(code, 0) << other_model.output();
  EXPECT_TRUE(Has(other_model, "this worker's model is not the job's")) << other_model.output();
  EndsCleanly(job, {0, 1});
  const std::string removal = LineWith(job.scheduler(), "failed before its first step");
  EXPECT_TRUE(absl::StrContains(removal, "worker 2") && absl::StrContains(removal, "model is not the job's"))
      << job.scheduler().output();
  EXPECT_EQ(RecordedSchedule(job).latest().ranks, (std::vector<int>{0, 1}));
  std::cout << removal << "\n" << LineWith(job.scheduler(), "2 workers from now") << std::endl;
}

// A joiner SIGKILLed once its join is committed, before its first step: after the
// rejoin timeout it is dropped like any dead worker. Every key waits at its join step,
// so its removal replaces its generation from that very step (which then merges no
// step), and the job ends cleanly with its two workers.
TEST(ElasticFaultsTest, AJoinerKilledBeforeItsFirstStepIsDropped) {
  ElasticJobOptions o;
  o.epochs = 1;
  o.env = {{"DTRAIN_REJOIN_TIMEOUT", "3"}, {"DTRAIN_SYNC_TIMEOUT", "300"}};
  ElasticJob job(o);
  ASSERT_NE(WaitForLine(job.worker(0), "", "Epoch[0] Batch [3]", absl::Minutes(3)), std::string::npos)
      << job.worker(0).output();
  Subprocess& joiner = job.AddJoiner();
  ASSERT_TRUE(joiner.WaitForOutput("joins at step", kLineTimeout)) << joiner.output();
  joiner.Signal(SIGKILL);
  EXPECT_EQ(joiner.Wait(absl::Seconds(10)), 128 + SIGKILL);
  EndsCleanly(job, {0, 1});
  std::cout << LineWith(job.scheduler(), "joined at step") << "\n"
            << LineWith(job.scheduler(), "2 workers from now") << std::endl;
}

}  // namespace
}  // namespace dtrain::testing
