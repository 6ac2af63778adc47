#include "tests/integration/recovery/launched_job.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace dtrain::testing {

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t FindLaunchedChild(pid_t launcher, const std::string& role, int rank) {
  const std::string want = "DTRAIN_RANK=" + std::to_string(rank);
  const std::string l = std::to_string(launcher);
  const std::vector<std::string> children =
      absl::StrSplit(ReadTextFile("/proc/" + l + "/task/" + l + "/children"), ' ', absl::SkipWhitespace());
  for (const std::string& c : children) {
    const std::string cmd = ReadTextFile("/proc/" + c + "/cmdline");
    if (cmd.find("dtrain-" + role) == std::string::npos) continue;
    bool match = role == "scheduler";
    for (absl::string_view v : absl::StrSplit(ReadTextFile("/proc/" + c + "/environ"), '\0')) match |= v == want;
    int pid = 0;
    if (match && absl::SimpleAtoi(c, &pid)) return pid;
  }
  return -1;
}

size_t WaitForLine(Subprocess& job, const std::string& who, const std::string& text, absl::Duration timeout,
                   size_t from) {
  const absl::Time deadline = absl::Now() + timeout;
  size_t scanned = from;  // complete lines before this are known not to match
  while (absl::Now() < deadline) {
    const std::string& out = job.output();
    for (;;) {
      const size_t eol = out.find('\n', scanned);
      if (eol == std::string::npos) break;
      const absl::string_view line(out.data() + scanned, eol - scanned);
      scanned = eol + 1;
      if (absl::StartsWith(line, who) && line.find(text) != absl::string_view::npos) return scanned;
    }
    if (!job.running()) return std::string::npos;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return std::string::npos;
}

std::vector<std::string> FinalWeights(const std::string& output) {
  return ValuesAfter(output, "weights-fnv64", "Training done");
}

}  // namespace dtrain::testing
