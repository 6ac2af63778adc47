#include "tests/integration/recovery/launched_job.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dtrain::testing {

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t ChaosSeed() {
  const char* s = std::getenv("DTRAIN_CHAOS_SEED");
  uint64_t seed = 1;
  if (s != nullptr && !absl::SimpleAtoi(s, &seed)) seed = 1;
  return seed;
}

std::string SharedReference(const std::string& name, const std::vector<std::string>& argv, int num_workers,
                            absl::Duration timeout) {
  static std::map<std::string, std::string>* cached = new std::map<std::string, std::string>();
  if (auto it = cached->find(name); it != cached->end()) return it->second;
  const char* shared = std::getenv("DTRAIN_TEST_SHARED_DIR");
  const std::string path = shared != nullptr ? std::string(shared) + "/" + name : MakeTempDir() + "/" + name;
  // The lock makes concurrent scenarios wait for the first one's run instead of each
  // running its own.
  const int lock = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string ref = ReadTextFile(path);
  if (ref.empty()) {
    auto [code, out] = RunToEnd(argv, timeout);
    const std::vector<std::string> w = FinalWeights(out);
    bool agree = code == 0 && static_cast<int>(w.size()) == num_workers;
    for (const std::string& x : w) agree = agree && x == w[0];
    if (agree) {
      ref = w[0];
      std::ofstream(path + ".tmp") << ref;
      std::rename((path + ".tmp").c_str(), path.c_str());
    } else {
      ADD_FAILURE() << "the uninterrupted reference run failed (exit " << code << "):\n" << out;
    }
  }
  if (lock >= 0) ::close(lock);
  if (!ref.empty()) (*cached)[name] = ref;
  return ref;
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

std::vector<std::string> ChaosRecipe(const std::string& prefix, const std::vector<std::string>& launch_flags,
                                     const std::vector<std::string>& worker_flags) {
  std::vector<std::string> argv = {Bin("dtrain"), "launch", "-n", "2", "-s", "2"};
  argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
  for (const char* f : {"--", "--network", "lenet", "--num-epochs", "2", "--num-examples", "3000",
                        "--num-test-examples", "500", "--seed", "11", "--disp-batches", "1", "--model-prefix"}) {
    argv.push_back(f);
  }
  argv.push_back(prefix);
  argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
  return argv;
}

namespace {
const char* const kRestartFlags[] = {"--max-restarts", "3", "--restart-backoff", "0.1"};
}  // namespace

std::vector<std::string> FailoverRecipe(const std::string& prefix, int servers, int replication, bool restarts) {
  std::vector<std::string> argv = {Bin("dtrain"),
                                   "launch",
                                   "-n",
                                   "2",
                                   "-s",
                                   std::to_string(servers),
                                   "--kv-store",
                                   "dist_sync",
                                   "--replication",
                                   std::to_string(replication)};
  if (restarts) argv.insert(argv.end(), std::begin(kRestartFlags), std::end(kRestartFlags));
  for (const char* f : {"--", "--network", "lenet", "--num-epochs", "6", "--num-examples", "3000",
                        "--num-test-examples", "500", "--seed", "11", "--disp-batches", "1", "--model-prefix"}) {
    argv.push_back(f);
  }
  argv.push_back(prefix);
  return argv;
}

std::vector<std::string> SnapshotRecipe(const std::string& prefix, bool snapshots) {
  std::vector<std::string> argv = {Bin("dtrain"), "launch", "-n", "2", "-s", "2"};
  if (snapshots) {
    argv.insert(argv.end(), std::begin(kRestartFlags), std::end(kRestartFlags));
    argv.push_back("--snapshot-every");
    argv.push_back("50");
  }
  for (const char* f : {"--", "--network", "lenet", "--num-epochs", "3", "--num-examples", "3000",
                        "--num-test-examples", "500", "--seed", "5", "--disp-batches", "1", "--model-prefix"}) {
    argv.push_back(f);
  }
  argv.push_back(prefix);
  return argv;
}

std::string ChaosReference(absl::Duration timeout) {
  // The strictly sequential step: every recovery test runs the default (--overlap), so
  // each checks the overlapped path against it bit for bit.
  return SharedReference("chaos-reference",
                         ChaosRecipe(MakeTempDir() + "/ref", {"--kv-store", "dist_sync"}, {"--no-overlap"}), 2,
                         timeout);
}

std::vector<std::string> FinalWeights(const std::string& output) {
  return ValuesAfter(output, "weights-fnv64", "Training done");
}

}  // namespace dtrain::testing
