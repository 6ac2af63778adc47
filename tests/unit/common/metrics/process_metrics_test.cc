// dtrain_build_info and the standard process_* series on every registry's page.
#include "common/metrics/process_metrics.h"

#include <unistd.h>

#include <string>

#include "absl/time/clock.h"
#include "common/metrics/registry.h"
#include "gtest/gtest.h"
#include "tests/unit/common/metrics/exposition.h"

namespace dtrain::metrics {
namespace {

using ::dtrain::testing::ParseExposition;

TEST(ProcessMetricsTest, ParsesProcSelfStatWithSpacesInTheName) {
  // proc(5): pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss
  const std::string stat =
      "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 300 "
      "18446744073709551615";
  internal::ProcessStat st;
  ASSERT_TRUE(internal::ParseProcStat(stat, 1700000000, 100, 4096, &st));
  EXPECT_DOUBLE_EQ(st.cpu_seconds, 3.0);
  EXPECT_DOUBLE_EQ(st.start_time_seconds, 1700000010.0);
  EXPECT_DOUBLE_EQ(st.virtual_bytes, 123456789);
  EXPECT_DOUBLE_EQ(st.resident_bytes, 300 * 4096.0);
  EXPECT_FALSE(internal::ParseProcStat("42 (x) S 1 2", 0, 100, 4096, &st));
  EXPECT_FALSE(internal::ParseProcStat("no paren", 0, 100, 4096, &st));
}

TEST(ProcessMetricsTest, EveryRoleSPageCarriesBuildAndProcessSeries) {
  for (const char* role : {"scheduler", "server", "worker", "inference"}) {
    MetricsRegistry registry(role);
    registry.SetRank(0);
    auto page = ParseExposition(registry.Render());
    ASSERT_TRUE(page.ok()) << page.status() << "\n" << registry.Render();
    auto info = page->Find("dtrain_build_info");
    ASSERT_EQ(info.size(), 1u) << role;
    EXPECT_EQ(info[0].value, 1);
    EXPECT_EQ(info[0].labels.at("version"), BuildVersion());
    EXPECT_EQ(info[0].labels.at("commit"), BuildCommit());
    EXPECT_FALSE(BuildCommit().empty());
    EXPECT_EQ(info[0].labels.at("role"), role);
    EXPECT_EQ(page->types.at("process_cpu_seconds_total"), "counter");
    for (const char* gauge : {"process_resident_memory_bytes", "process_start_time_seconds", "process_open_fds",
                              "process_virtual_memory_bytes", "process_max_fds"}) {
      EXPECT_EQ(page->types.at(gauge), "gauge") << gauge;
      ASSERT_EQ(page->Find(gauge).size(), 1u) << gauge;
      EXPECT_GT(page->Find(gauge)[0].value, 0) << gauge;
    }
    const double start = page->Find("process_start_time_seconds")[0].value;
    const double now = absl::ToUnixSeconds(absl::Now());
    EXPECT_LE(start, now + 2);
    EXPECT_GT(start, now - 24 * 3600) << "this test process started within the day";
    EXPECT_GE(page->Find("process_cpu_seconds_total")[0].value, 0);
    EXPECT_GT(page->Find("process_resident_memory_bytes")[0].value, 1 << 20);
  }
}

}  // namespace
}  // namespace dtrain::metrics
