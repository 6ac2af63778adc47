// Real child processes for integration tests: start, read output, wait with a
// deadline, kill. A child that outlives its test is killed by the destructor.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dtrain::testing {

class Subprocess {
 public:
  // argv[0] is the program path. `env` entries are added to (or override) ours.
  Subprocess(std::vector<std::string> argv, std::map<std::string, std::string> env = {});
  ~Subprocess();  // SIGKILLs the child (and its process group) if still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Waits for exit or `timeout`; returns the exit code (128+signal if killed), or -1
  // on timeout (the child is then left running).
  int Wait(absl::Duration timeout);
  // Waits until the output contains `text` or the deadline; false on timeout/exit.
  bool WaitForOutput(const std::string& text, absl::Duration timeout);
  void Signal(int sig);
  bool running();
  pid_t pid() const { return pid_; }
  // stdout and stderr, merged, so far.
  const std::string& output();

 private:
  void Drain(int timeout_ms);
  pid_t pid_ = -1;
  int fd_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::string output_;
};

// Runs to completion (or kills at timeout); returns {exit code or -1, output}.
std::pair<int, std::string> RunToEnd(std::vector<std::string> argv, absl::Duration timeout,
                                     std::map<std::string, std::string> env = {});

// Where the build put the binaries (CMake passes DTRAIN_BIN_DIR; $DTRAIN_TEST_BIN_DIR overrides).
std::string Bin(const std::string& name);
// A fresh temporary directory under $TMPDIR, removed (if the test did not) when the
// test program exits.
std::string MakeTempDir();
// Every value of `key=` on lines of `output` that contain `must_contain`, as text.
std::vector<std::string> ValuesAfter(const std::string& output, const std::string& key,
                                     const std::string& must_contain = "");

}  // namespace dtrain::testing
