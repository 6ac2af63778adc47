// What every dtrain process exports besides its role's families, under
// Prometheus' standard names so that stock dashboards and alerts work:
//   process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
//   process_start_time_seconds, process_open_fds, process_max_fds   (from /proc/self)
//   dtrain_build_info{version, commit} 1                             (which build runs)
// Read at scrape time, so they cost nothing between scrapes. Linux only: elsewhere the
// /proc families are left out (the build info stays).
#pragma once

#include <string>
#include <vector>

#include <prometheus/metric_family.h>

namespace dtrain::metrics {

// The families above as of now. A /proc file that cannot be read leaves its families
// out rather than exporting a wrong 0.
std::vector<prometheus::MetricFamily> CollectProcessFamilies();

// The text of the build-info labels, "0.1.0" and "abc1234" (or "abc1234-dirty").
std::string BuildVersion();
std::string BuildCommit();

namespace internal {

// The parsing, separate for tests: `stat` is /proc/self/stat's text, `boot_time_s`
// /proc/stat's btime, `ticks_per_s` sysconf(_SC_CLK_TCK), `page_bytes` the page size.
struct ProcessStat {
  double cpu_seconds = 0;
  double start_time_seconds = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
};
bool ParseProcStat(const std::string& stat, double boot_time_s, double ticks_per_s, double page_bytes,
                   ProcessStat* out);

}  // namespace internal
}  // namespace dtrain::metrics
