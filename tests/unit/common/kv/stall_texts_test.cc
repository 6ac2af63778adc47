// The texts that name whom a stalled step waits for: HeardFrom's "worker 2 (last heard
// 31 s ago)" and StallReport's one line per step. Times are given, no clock runs.
#include <string>
#include <vector>

#include "common/kv/heard_from.h"
#include "common/kv/stall_report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

TEST(HeardFromTest, SaysWhenEachWorkerWasLastHeardFrom) {
  HeardFrom heard(3);
  EXPECT_TRUE(heard.Note(2, kStart));
  EXPECT_FALSE(heard.Note(2, kStart + absl::Seconds(5)));  // only the first time counts as new
  EXPECT_EQ(heard.Text(2, kStart + absl::Seconds(36)), "worker 2 (last heard 31 s ago)");
  EXPECT_EQ(heard.Text(0, kStart), "worker 0 (never heard from)");
  EXPECT_EQ(heard.Texts({0, 2}, kStart + absl::Seconds(5)),
            "worker 0 (never heard from), worker 2 (last heard 0 s ago)");
  EXPECT_EQ(heard.Texts({}, kStart), "");
}

TEST(StallReportTest, OneLinePerStepNamingEveryMissingWorker) {
  HeardFrom heard(3);
  heard.Note(1, kStart);
  StallReport report(3);
  EXPECT_TRUE(report.empty());
  report.Add(9, 4, {1});
  report.Add(8, 7, {2});
  report.Add(9, 5, {2});
  report.Add(9, 6, {1});
  EXPECT_FALSE(report.empty());
  EXPECT_THAT(report.Lines(heard, kStart + absl::Seconds(12)),
              ElementsAre("step 8 key 7: still waiting for worker 2 (never heard from)",
                          "step 9 key 4 (+2 more keys): still waiting for worker 1 (last heard 12 s ago), "
                          "worker 2 (never heard from)"));
}

}  // namespace
}  // namespace dtrain::kv
