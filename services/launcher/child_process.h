// One process started by `dtrain launch`: its own process group, stdout and
// stderr on one pipe read line by line, SIGTERM if the launcher dies.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dtrain::launcher {

struct ChildSpec {
  std::string name;               // "worker 1": used in line prefixes and messages
  std::string path;               // the executable; also argv[0]
  std::vector<std::string> args;  // argv[1..]
  // Added to (or replacing) the launcher's own environment.
  std::vector<std::pair<std::string, std::string>> env;
};

class Child {
 public:
  // Forks and execs. The child gets /dev/null as stdin, is the leader of a new
  // process group, and receives SIGTERM should the launcher die first. An exec
  // failure shows up as a line of output and exit status 127.
  static absl::StatusOr<std::unique_ptr<Child>> Start(const ChildSpec& spec);
  ~Child();  // SIGKILLs the group and reaps the child if it still runs
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }

  // The pipe to poll, or -1 once it was closed.
  int output_fd() const { return fd_; }
  // Reads what the pipe holds without blocking and passes each complete line
  // (without its '\n') to `line`. At end of file, or with `flush`, a partial last
  // line is passed too and the pipe is closed.
  void ReadOutput(const std::function<void(absl::string_view)>& line, bool flush = false);

  // Reaps without blocking; true once the child has exited. Then kills whatever
  // else is left in its process group, so nothing outlives the launcher.
  bool Reap();
  bool exited() const { return exited_; }
  absl::Time exited_at() const { return exited_at_; }
  // Exited with status 0.
  bool succeeded() const;
  // "exited with status 3", "was killed by signal 9 (Killed)".
  std::string DescribeExit() const;
  // The same without "was": "killed by signal 9 (Killed)", for "restarting worker 1 (1 of 3): ...".
  std::string ExitReason() const;
  // Once exited: the signal that killed it (0 if it exited), and its exit status.
  int term_signal() const;
  int exit_status() const;

  // Sends `sig` to the child's process group (no-op once it exited).
  void Signal(int sig);

 private:
  Child(std::string name, pid_t pid, int fd) : name_(std::move(name)), pid_(pid), fd_(fd) {}

  std::string name_;
  pid_t pid_;
  int fd_;
  std::string partial_;  // a line whose '\n' has not arrived yet
  bool exited_ = false;
  int wait_status_ = 0;
  absl::Time exited_at_ = absl::InfiniteFuture();
};

}  // namespace dtrain::launcher
