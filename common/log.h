// One event per line on stderr, safe to call from any thread.
//
//   DTRAIN_LOG(INFO) << "Epoch[" << e << "] Validation-accuracy=" << acc;
//
// Each line carries time, level and (once SetLogIdentity was called) the process's
// role and rank, so `kubectl logs` of any pod reads on its own. The identity comes
// first, as `dtrain launch` prefixes its children's lines ("[worker 1] 2026-... I ..."):
// one format however the process was started. `dtrain launch` sets
// DTRAIN_LOG_IDENTITY=0 because it prefixes every child's lines itself.
#pragma once

#include <sstream>
#include <string>

namespace dtrain {

enum class LogLevel { kINFO, kWARNING, kERROR };

// E.g. SetLogIdentity("worker", 1): "[worker 1] "; rank < 0 prints the role alone ("[scheduler] ").
void SetLogIdentity(const std::string& role, int rank);

class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();  // writes the whole line with one write(2)
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace dtrain

#define DTRAIN_LOG(level) ::dtrain::LogLine(::dtrain::LogLevel::k##level, __FILE__, __LINE__).stream()
