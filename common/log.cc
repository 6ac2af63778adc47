#include "common/log.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dtrain {
namespace {

std::mutex g_identity_mu;
std::string g_identity;  // "[worker 1] " or empty

// Read from the environment, not through a FlagSet: the switch is `dtrain launch`'s word
// to its children (it prefixes their lines itself), not a setting anyone passes, and
// the logger is process-wide state that code holding no flags sets (SetLogIdentity
// again once a worker knows its final rank).
bool IdentityEnabled() {
  const char* v = std::getenv("DTRAIN_LOG_IDENTITY");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

void SetLogIdentity(const std::string& role, int rank) {
  std::lock_guard<std::mutex> lock(g_identity_mu);
  if (!IdentityEnabled()) {
    g_identity.clear();
    return;
  }
  // The launcher's prefix exactly ("[worker 1] " before the time), so a hand-launched
  // or Kubernetes process's lines read, and grep, like `dtrain launch`'s.
  g_identity = rank < 0 ? "[" + role + "] " : "[" + role + " " + std::to_string(rank) + "] ";
}

LogLine::LogLine(LogLevel level, const char* /*file*/, int /*line*/) : level_(level) {
  const char tag = level_ == LogLevel::kINFO ? 'I' : level_ == LogLevel::kWARNING ? 'W' : 'E';
  {
    std::lock_guard<std::mutex> lock(g_identity_mu);
    stream_ << g_identity;
  }
  stream_ << absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone()) << ' ' << tag << ' ';
}

LogLine::~LogLine() {
  stream_ << '\n';
  const std::string s = stream_.str();
  // One write per line: lines from different threads never interleave.
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(STDERR_FILENO, s.data() + off, s.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

}  // namespace dtrain
