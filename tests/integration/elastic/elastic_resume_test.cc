// An elastic job's checkpoints resume with the membership they were saved with
// (docs/elastic.md, "Checkpoints"): `dtrain launch --elastic` with --load-epoch starts
// the workers the checkpoint had, numbered 0 .. k-1, and the resumed run ends on the
// weights of the run that never stopped, bit for bit.
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/elastic/membership_file.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);

std::vector<std::string> Launch(const std::string& prefix, int workers, const std::vector<std::string>& launch_flags,
                                const std::vector<std::string>& worker_flags) {
  std::vector<std::string> argv = {Bin("dtrain"), "launch", "-n",        std::to_string(workers),
                                   "-s",          "2",      "--elastic", "2:3"};
  argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
  for (const char* f : {"--", "--network", "lenet", "--num-epochs", "3", "--num-examples", "3000",
                        "--num-test-examples", "500", "--seed", "5", "--disp-batches", "1", "--model-prefix"}) {
    argv.push_back(f);
  }
  argv.push_back(prefix);
  argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
  return argv;
}

// 3 workers; worker 0 leaves at step 5 (a recorded schedule holds its SIGTERM's leave
// there), so workers {1,2} end epoch 0 and run epochs 1 and 2, worker 1 writing the
// checkpoints from then on. The resume from checkpoint 1 starts 2 workers, numbered
// {0,1}, which take {1,2}'s places: the same weights as the run that never stopped.
TEST(ElasticResumeTest, AResumeAfterChangesStartsWithTheSavedMembershipAndEndsBitIdentical) {
  const std::string dir = MakeTempDir();
  const std::string prefix = dir + "/lenet";
  const std::string schedule = dir + "/leave-at-5.json";
  ASSERT_TRUE(
      elastic::WriteMembershipFile(schedule, *elastic::MembershipSchedule::Create(2, 3, {{0, {0, 1, 2}}, {5, {1, 2}}}))
          .ok());
  std::vector<std::string> whole;
  {
    Subprocess job(Launch(prefix, 3, {"--replay-membership", schedule}, {}));
    ASSERT_NE(WaitForLine(job, "[worker 0]", "Epoch[0] Batch [1]", absl::Minutes(3)), std::string::npos)
        << job.output();
    const pid_t leaver = FindLaunchedChild(job.pid(), "worker", 0);
    ASSERT_GT(leaver, 0) << job.output();
    ASSERT_EQ(::kill(leaver, SIGTERM), 0);
    ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
    EXPECT_NE(job.output().find("left the job at step 5"), std::string::npos) << job.output();
    whole = FinalWeights(job.output());
    ASSERT_EQ(whole.size(), 2u) << job.output();
    EXPECT_EQ(whole[0], whole[1]);
  }
  // What checkpoint 1 (after epoch 0: steps 0-4 of 3 workers, 5-19 of 2) resumes with,
  // written by worker 1.
  EXPECT_TRUE(std::filesystem::exists(prefix + "-0003.params"));
  auto saved = elastic::ReadMembershipFile(elastic::CheckpointMembershipPath(prefix, 1));
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->generations().size(), 3u) << elastic::MembershipToJson(*saved);
  EXPECT_EQ(saved->generations()[1], (elastic::Generation{5, {1, 2}}));
  EXPECT_EQ(saved->generations()[2], (elastic::Generation{20, {0, 1}}));

  // -n must be the checkpoint's worker count: said before anything starts.
  {
    Subprocess wrong(Launch(prefix, 3, {}, {"--load-epoch", "1", "--overwrite-checkpoints"}));
    EXPECT_EQ(wrong.Wait(absl::Seconds(30)), 2) << wrong.output();
    EXPECT_NE(wrong.output().find("checkpoint 1 resumes with 2 workers"), std::string::npos) << wrong.output();
    EXPECT_NE(wrong.output().find("start it with -n 2"), std::string::npos) << wrong.output();
  }
  Subprocess resumed(Launch(prefix, 2, {}, {"--load-epoch", "1", "--overwrite-checkpoints"}));
  ASSERT_EQ(resumed.Wait(kRunTimeout), 0) << resumed.output();
  EXPECT_NE(resumed.output().find("resuming with the checkpoint's membership"), std::string::npos) << resumed.output();
  EXPECT_NE(resumed.output().find("starting at epoch 1 batch 0 (step 20)"), std::string::npos) << resumed.output();
  const std::vector<std::string> again = FinalWeights(resumed.output());
  ASSERT_EQ(again.size(), 2u) << resumed.output();
  EXPECT_EQ(again[0], whole[0]) << resumed.output();
  EXPECT_EQ(again[1], whole[0]);
}

}  // namespace
}  // namespace dtrain::testing
