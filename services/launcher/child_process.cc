#include "services/launcher/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace dtrain::launcher {
namespace {

// A line longer than this is passed on in pieces rather than held forever.
constexpr size_t kMaxLine = 64 << 10;

void WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Child>> Child::Start(const ChildSpec& spec) {
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls are allowed.
  std::vector<std::string> argv_storage{spec.path};
  argv_storage.insert(argv_storage.end(), spec.args.begin(), spec.args.end());
  std::set<std::string> overridden;
  std::vector<std::string> env_storage;
  for (const auto& [k, v] : spec.env) {
    overridden.insert(k);
    env_storage.push_back(k + "=" + v);
  }
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr && overridden.count(std::string(*e, static_cast<size_t>(eq - *e))) == 0)
      env_storage.emplace_back(*e);
  }
  std::vector<char*> argv, envp;
  for (auto& s : argv_storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  const std::string exec_error = absl::StrCat("dtrain launch: cannot execute ", spec.path, "\n");

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    if (devnull >= 0) ::close(devnull);
    return absl::InternalError(absl::StrCat("fork for ", spec.name, ": ", std::strerror(err)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the launcher died before prctl took effect
    ::signal(SIGPIPE, SIG_DFL);             // ignored dispositions survive exec
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    WriteAll(2, exec_error.data(), exec_error.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so a Signal right after Start reaches the group
  ::close(fds[1]);
  if (devnull >= 0) ::close(devnull);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return std::unique_ptr<Child>(new Child(spec.name, pid, fds[0]));
}

Child::~Child() {
  if (!exited_) {
    Signal(SIGKILL);
    ::waitpid(pid_, &wait_status_, 0);
  }
  if (fd_ >= 0) ::close(fd_);
}

void Child::ReadOutput(const std::function<void(absl::string_view)>& line, bool flush) {
  if (fd_ < 0) return;
  char buf[16384];
  bool eof = false;
  while (true) {
    ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = n == 0;
      break;
    }
    partial_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      line(absl::string_view(partial_).substr(start, nl - start));
    }
    partial_.erase(0, start);
    if (partial_.size() > kMaxLine) {
      line(partial_);
      partial_.clear();
    }
  }
  if (eof || flush) {
    if (!partial_.empty()) line(partial_);
    partial_.clear();
    ::close(fd_);
    fd_ = -1;
  }
}

bool Child::Reap() {
  if (exited_) return true;
  pid_t r;
  do {
    r = ::waitpid(pid_, &wait_status_, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  exited_ = true;
  exited_at_ = absl::Now();
  // Anything the child started in its group goes with it.
  ::kill(-pid_, SIGKILL);
  return true;
}

bool Child::succeeded() const { return exited_ && WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == 0; }

std::string Child::DescribeExit() const {
  if (!exited_) return "is still running";
  if (WIFEXITED(wait_status_)) return absl::StrCat("exited with status ", WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) {
    const int sig = WTERMSIG(wait_status_);
    return absl::StrCat("was killed by signal ", sig, " (", ::strsignal(sig), ")");
  }
  return "stopped";
}

std::string Child::ExitReason() const {
  const std::string text = DescribeExit();
  return text.rfind("was ", 0) == 0 ? text.substr(4) : text;
}

int Child::term_signal() const { return exited_ && WIFSIGNALED(wait_status_) ? WTERMSIG(wait_status_) : 0; }

int Child::exit_status() const { return exited_ && WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : 0; }

void Child::Signal(int sig) {
  if (exited_) return;
  if (::kill(-pid_, sig) != 0) ::kill(pid_, sig);
}

}  // namespace dtrain::launcher
