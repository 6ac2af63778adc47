// The scheduler's check of a registering node's cluster spec (common/cluster_spec.h):
// canonical text round trip, and refusals that name what differs.
#include "common/cluster_spec.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtrain {
namespace {

using ::testing::HasSubstr;

TEST(ClusterSpecTest, CanonicalTextRoundTrips) {
  const ClusterSpec spec{{"10.0.0.1:2222", "[fd00::1]:2222"}, {"10.0.0.3:2222"}};
  const std::string text = CanonicalClusterSpec(spec);
  EXPECT_EQ(text, "ps=10.0.0.1:2222,[fd00::1]:2222;worker=10.0.0.3:2222");
  auto back = ParseCanonicalClusterSpec(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, spec);
  EXPECT_FALSE(ParseCanonicalClusterSpec("ps=a:1").ok());
  EXPECT_FALSE(ParseCanonicalClusterSpec("ps=a:1;worker=b:1;ps=c:1").ok());
  EXPECT_FALSE(ParseCanonicalClusterSpec("ps=a:1,,b:1;worker=c:1").ok());
  EXPECT_THAT(std::string(ParseCanonicalClusterSpec(std::string(kMaxClusterSpecBytes + 1, 'x')).status().message()),
              HasSubstr("the limit is"));
}

TEST(ClusterSpecTest, AMismatchNamesTheListAndBothCopies) {
  const std::string scheduler = "ps=10.0.0.2:2222;worker=10.0.0.3:2222,10.0.0.4:2222";
  EXPECT_TRUE(CompareClusterSpecs(scheduler, scheduler, "worker 1").ok());
  // Nothing to compare with: a node or a scheduler started without a spec.
  EXPECT_TRUE(CompareClusterSpecs("", scheduler, "worker 1").ok());
  EXPECT_TRUE(CompareClusterSpecs(scheduler, "", "worker 1").ok());

  absl::Status s = CompareClusterSpecs(scheduler, "ps=10.0.0.2:2223;worker=10.0.0.3:2222,10.0.0.4:2222", "worker 1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "cluster spec mismatch: worker 1's --ps_hosts is 10.0.0.2:2223 but the scheduler's (worker 0's) is "
            "10.0.0.2:2222; every node must be started with the same --ps_hosts and --worker_hosts");

  s = CompareClusterSpecs(scheduler, "ps=10.0.0.9:2222;worker=10.0.0.3:2222", "server 0");
  EXPECT_THAT(std::string(s.message()), HasSubstr("server 0's --ps_hosts is 10.0.0.9:2222 but"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("; server 0's --worker_hosts is 10.0.0.3:2222 but the scheduler's (worker 0's) is "
                        "10.0.0.3:2222,10.0.0.4:2222"));

  EXPECT_EQ(CompareClusterSpecs(scheduler, "garbage", "worker 1").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClusterSpecTest, LongListsNameTheFirstEntryThatDiffers) {
  ClusterSpec a;
  ClusterSpec b;
  for (int i = 0; i < 40; ++i) {
    a.worker.push_back("worker-host-" + std::to_string(i) + ".example:2222");
    b.worker.push_back(a.worker.back());
  }
  a.ps = b.ps = {"p:1"};
  b.worker[7] = "other.example:2222";
  EXPECT_EQ(DescribeClusterSpecDifference(b, "worker 3's", a, "the scheduler's (worker 0's)"),
            "worker 3's --worker_hosts lists 40 hosts and entry 7 is other.example:2222, but the scheduler's "
            "(worker 0's) lists 40 and entry 7 is worker-host-7.example:2222");
  b.worker = a.worker;
  b.worker.pop_back();
  EXPECT_THAT(DescribeClusterSpecDifference(b, "worker 3's", a, "the scheduler's"),
              HasSubstr("lists 39 hosts and no entry 39, but the scheduler's lists 40 and entry 39 is"));
}

}  // namespace
}  // namespace dtrain
