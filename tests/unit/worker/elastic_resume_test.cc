// An elastic checkpoint's membership and the step its resume starts at.
#include "services/worker/elastic_resume.h"

#include <string>

#include "common/elastic/membership_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::worker {
namespace {

using elastic::MembershipSchedule;
using ::testing::HasSubstr;

// 120 examples, batches of 10: 3 workers take 4 steps an epoch, 2 take 6.
TEST(ElasticCheckpointTest, TheSavedMembershipGivesTheEpochsFirstStepAndOnlyItDoes) {
  testing::TempDir dir;
  const std::string prefix = dir.File("m");
  const MembershipSchedule run = *MembershipSchedule::Create(2, 3, {{0, {0, 1, 2}}, {2, {0, 2}}});
  // Epoch 0: steps 0-1 of 3 workers (60 examples), then 3 of 2: it ends at step 5.
  ASSERT_TRUE(SaveCheckpointMembership(prefix, 1, run, 5).ok());
  const auto saved = elastic::ReadMembershipFile(elastic::CheckpointMembershipPath(prefix, 1));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, run.ResumedAt(5));

  // The scheduler started with the file: epoch 1 starts at step 5.
  const auto step = ElasticResumeStep(prefix, 1, 7, 120, 10, *saved);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 5);
  // A scheduler started without it (workers 0 and 1 from step 0) is named as the cause.
  const auto plain = ElasticResumeStep(prefix, 1, 7, 120, 10, *MembershipSchedule::Create(2, 3, {{0, {0, 1}}}));
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plain.status().message(), HasSubstr("--resume-membership " + prefix + "-0001.membership.json"));
  // A checkpoint without the file (saved by a job that was not elastic).
  const auto none = ElasticResumeStep(prefix, 2, 7, 120, 10, *saved);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr(prefix + "-0002.membership.json"));
}

}  // namespace
}  // namespace dtrain::worker
