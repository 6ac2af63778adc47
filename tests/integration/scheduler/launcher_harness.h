// What the `dtrain launch` tests share: a --bin-dir with the real scheduler and
// fake_node as server and worker, and checks on the job's output and processes.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {

inline constexpr absl::Duration kRunTimeout = absl::Seconds(60);

inline std::string FakeBinDir() {
  const std::string dir = MakeTempDir();
  EXPECT_EQ(::symlink(Bin("dtrain-scheduler").c_str(), (dir + "/dtrain-scheduler").c_str()), 0);
  EXPECT_EQ(::symlink(FAKE_NODE_PATH, (dir + "/dtrain-server").c_str()), 0);
  EXPECT_EQ(::symlink(FAKE_NODE_PATH, (dir + "/dtrain-worker").c_str()), 0);
  return dir;
}

inline std::vector<std::string> Launch(const std::string& bin_dir, std::vector<std::string> tail) {
  std::vector<std::string> argv = {Bin("dtrain"), "launch", "--bin-dir", bin_dir};
  argv.insert(argv.end(), tail.begin(), tail.end());
  return argv;
}

// Every pid the job's processes printed: fake nodes say pid=N, the scheduler "(pid N)".
inline std::vector<int> Pids(const std::string& output) {
  std::vector<int> pids;
  for (const std::string& v : ValuesAfter(output, "pid")) {
    int p;
    if (absl::SimpleAtoi(v, &p)) pids.push_back(p);
  }
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    size_t at = line.find("(pid ");
    if (at == absl::string_view::npos) continue;
    int p;
    absl::string_view rest = line.substr(at + 5);
    if (absl::SimpleAtoi(rest.substr(0, rest.find(')')), &p)) pids.push_back(p);
  }
  return pids;
}

inline bool Running(int pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || line.substr(paren + 2, 1) != "Z";  // a zombie is not running
}

inline void ExpectNothingLeft(const std::string& output, size_t expected_processes) {
  const std::vector<int> pids = Pids(output);
  EXPECT_EQ(pids.size(), expected_processes) << output;
  for (int pid : pids) EXPECT_FALSE(Running(pid)) << "pid " << pid << " outlived the launcher";
}

// Every line of the job's output carries its source.
inline void ExpectPrefixed(const std::string& output) {
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "[scheduler] ") || absl::StartsWith(line, "[server ") ||
                absl::StartsWith(line, "[worker ") || absl::StartsWith(line, "dtrain launch: "))
        << line;
  }
}

inline bool Eventually(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// Heartbeats every 100 ms: deaths are noticed fast.
inline const std::map<std::string, std::string> kFastEnv = {{"DTRAIN_HEARTBEAT_INTERVAL", "0.1"}};

}  // namespace dtrain::testing
