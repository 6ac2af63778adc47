#include "common/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/version_info.h"

namespace dtrain::metrics {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

prometheus::MetricFamily Family(const std::string& name, const std::string& help, prometheus::MetricType type,
                                double value, prometheus::ClientMetric::Label label = {},
                                prometheus::ClientMetric::Label label2 = {}) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  for (auto& l : {label, label2}) {
    if (!l.name.empty()) m.label.push_back(l);
  }
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

// /proc/stat's "btime N": the boot time, which /proc/self/stat's start time counts from.
bool BootTime(double* out) {
  std::istringstream in(ReadSmallFile("/proc/stat"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return absl::SimpleAtod(line.substr(6), out);
  }
  return false;
}

}  // namespace

std::string BuildVersion() { return DTRAIN_VERSION; }
std::string BuildCommit() { return DTRAIN_GIT_COMMIT; }

namespace internal {

bool ParseProcStat(const std::string& stat, double boot_time_s, double ticks_per_s, double page_bytes,
                   ProcessStat* out) {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so the fields
  // are counted from the last ')'. After it, field 3 (state) is index 0.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || ticks_per_s <= 0) return false;
  const std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  // utime 14, stime 15, starttime 22, vsize 23, rss 24 (proc(5), 1-based) -> index n - 3.
  if (f.size() < 22) return false;
  double utime, stime, start, vsize, rss;
  if (!absl::SimpleAtod(f[11], &utime) || !absl::SimpleAtod(f[12], &stime) || !absl::SimpleAtod(f[19], &start) ||
      !absl::SimpleAtod(f[20], &vsize) || !absl::SimpleAtod(f[21], &rss)) {
    return false;
  }
  out->cpu_seconds = (utime + stime) / ticks_per_s;
  out->start_time_seconds = boot_time_s + start / ticks_per_s;
  out->virtual_bytes = vsize;
  out->resident_bytes = rss * page_bytes;
  return true;
}

}  // namespace internal

std::vector<prometheus::MetricFamily> CollectProcessFamilies() {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  out.push_back(Family("dtrain_build_info", "The build this process runs: version and git commit (always 1).",
                       MetricType::Gauge, 1, {"version", BuildVersion()}, {"commit", BuildCommit()}));
  double boot = 0;
  internal::ProcessStat st;
  if (BootTime(&boot) &&
      internal::ParseProcStat(ReadSmallFile("/proc/self/stat"), boot, static_cast<double>(::sysconf(_SC_CLK_TCK)),
                              static_cast<double>(::sysconf(_SC_PAGESIZE)), &st)) {
    out.push_back(Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                         MetricType::Counter, st.cpu_seconds));
    out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
                         st.resident_bytes));
    out.push_back(
        Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge, st.virtual_bytes));
    out.push_back(Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                         MetricType::Gauge, st.start_time_seconds));
  }
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++fds;
  // The listing's own descriptor is counted too; it is gone once the listing is.
  if (!ec && fds > 0)
    out.push_back(Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, fds - 1));
  struct rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    out.push_back(Family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
                         static_cast<double>(lim.rlim_cur)));
  }
  return out;
}

}  // namespace dtrain::metrics
