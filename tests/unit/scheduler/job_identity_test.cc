#include "services/scheduler/job_identity.h"

#include <gtest/gtest.h>

namespace dtrain::scheduler {
namespace {

using Source = JobIdentity::Source;

bool Names(const absl::Status& s, const std::string& text) {
  return s.code() == absl::StatusCode::kFailedPrecondition && s.message().find(text) != absl::string_view::npos;
}

TEST(JobIdentityTest, AConfiguredIdIsNeverDisplaced) {
  JobIdentity job("job-a");
  EXPECT_EQ(job.source(), Source::kConfigured);
  std::string displaced = "x";
  EXPECT_TRUE(Names(job.Claim("job-b", /*survivor=*/true, "server pid 9", &displaced),
                    "server pid 9 belongs to job 'job-b', but this scheduler runs job 'job-a'"));
  EXPECT_TRUE(job.Claim("job-a", true, "server pid 9", &displaced).ok());
  EXPECT_EQ(displaced, "");
  EXPECT_TRUE(job.Claim("", false, "worker pid 1").ok());
  job.Settle();
  EXPECT_EQ(job.id(), "job-a");
}

TEST(JobIdentityTest, NothingIsMadeUpBeforeSettle) {
  JobIdentity job("");
  EXPECT_TRUE(job.Claim("", false, "worker pid 1").ok());
  EXPECT_EQ(job.id(), "");
  EXPECT_EQ(job.source(), Source::kNone);
  EXPECT_TRUE(job.Check("job-q", "worker 0").ok()) << "no id yet: nothing to refuse";
  job.Settle();
  EXPECT_EQ(job.id().rfind("job-", 0), 0u) << job.id();
  EXPECT_EQ(job.id().size(), 20u) << job.id();
  EXPECT_TRUE(job.settled());
  EXPECT_TRUE(Names(job.Check("job-q", "worker 0"), "worker 0 belongs to job 'job-q'"));
}

TEST(JobIdentityTest, ASurvivorDisplacesANewProcessButNotTheReverse) {
  JobIdentity job("");
  std::string displaced;
  ASSERT_TRUE(job.Claim("job-new", false, "worker pid 1", &displaced).ok());
  EXPECT_EQ(displaced, "") << "nothing held before";
  EXPECT_EQ(job.source(), Source::kNewProcess);
  ASSERT_TRUE(job.Claim("job-old", true, "server pid 2", &displaced).ok());
  EXPECT_EQ(displaced, "job-new");
  EXPECT_EQ(job.id(), "job-old");
  EXPECT_EQ(job.source(), Source::kSurvivor);
  EXPECT_TRUE(Names(job.Claim("job-new", false, "worker pid 3", &displaced), "worker pid 3 belongs to job 'job-new'"));
  EXPECT_TRUE(Names(job.Claim("job-other", true, "worker pid 4", &displaced), "but this scheduler runs job 'job-old'"))
      << "two survivors of different jobs: the first stays";
}

TEST(JobIdentityTest, TwoNewProcessesWithDifferentIdsTheFirstStays) {
  JobIdentity job("");
  ASSERT_TRUE(job.Claim("job-1", false, "worker pid 1").ok());
  EXPECT_TRUE(Names(job.Claim("job-2", false, "worker pid 2"), "worker pid 2 belongs to job 'job-2'"));
  // A survivor confirming the id makes it a survivor's: a later survivor of another job cannot take it.
  ASSERT_TRUE(job.Claim("job-1", true, "server pid 3").ok());
  EXPECT_EQ(job.source(), Source::kSurvivor);
  EXPECT_FALSE(job.Claim("job-3", true, "worker pid 4").ok());
}

TEST(JobIdentityTest, SettledRefusesEvenASurvivor) {
  JobIdentity job("");
  ASSERT_TRUE(job.Claim("job-1", false, "worker pid 1").ok());
  job.Settle();
  EXPECT_EQ(job.id(), "job-1");
  EXPECT_FALSE(job.Claim("job-2", true, "server pid 2").ok());
}

TEST(JobIdentityTest, MadeUpIdsDiffer) {
  JobIdentity a(""), b("");
  a.Settle();
  b.Settle();
  EXPECT_NE(a.id(), b.id());
}

}  // namespace
}  // namespace dtrain::scheduler
