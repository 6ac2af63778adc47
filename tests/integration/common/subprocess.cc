#include "tests/integration/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <cstring>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace dtrain::testing {

Subprocess::Subprocess(std::vector<std::string> argv, std::map<std::string, std::string> env) {
  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (env.count(kv.substr(0, kv.find('='))) == 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : envs) e.push_back(s.data());
    e.push_back(nullptr);
    ::execve(a[0], a.data(), e.data());
    std::fprintf(stderr, "exec %s: %s\n", a[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(fds[1]);
  fd_ = fds[0];
  ::fcntl(fd_, F_SETFL, O_NONBLOCK);
}

Subprocess::~Subprocess() {
  if (running()) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status_, 0);
  }
  if (fd_ >= 0) ::close(fd_);
}

void Subprocess::Drain(int timeout_ms) {
  if (fd_ < 0) return;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n > 0) {
      output_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {  // every writer closed
      ::close(fd_);
      fd_ = -1;
    }
    return;
  }
}

bool Subprocess::running() {
  if (exited_ || pid_ <= 0) return false;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

int Subprocess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (running() && absl::Now() < deadline) Drain(50);
  if (running()) return -1;
  // The child is gone; collect what its (possibly surviving) children still write briefly.
  for (int i = 0; i < 10 && fd_ >= 0; ++i) Drain(20);
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  return 128 + WTERMSIG(status_);
}

bool Subprocess::WaitForOutput(const std::string& text, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    Drain(50);
    if (output_.find(text) != std::string::npos) return true;
    if (!running() && fd_ < 0) return false;
  }
  return false;
}

void Subprocess::Signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

const std::string& Subprocess::output() {
  Drain(0);
  return output_;
}

std::pair<int, std::string> RunToEnd(std::vector<std::string> argv, absl::Duration timeout,
                                     std::map<std::string, std::string> env) {
  Subprocess p(std::move(argv), std::move(env));
  int code = p.Wait(timeout);
  return {code, p.output()};
}

// DTRAIN_TEST_BIN_DIR runs the same tests against other binaries (e.g. an older build,
// to show a test fails there).
std::string Bin(const std::string& name) {
  const char* dir = std::getenv("DTRAIN_TEST_BIN_DIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : DTRAIN_BIN_DIR) + "/" + name;
}

namespace {

// Every directory MakeTempDir made, removed when the test program exits: a test that
// stops at a failed ASSERT (or forgets) must not leave it in $TMPDIR.
class MadeDirs {
 public:
  ~MadeDirs() {
    std::lock_guard<std::mutex> lock(mu_);
    std::error_code ec;
    for (const std::string& d : dirs_) std::filesystem::remove_all(d, ec);
  }
  void Add(std::string dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(std::move(dir));
  }

 private:
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

}  // namespace

std::string MakeTempDir() {
  static MadeDirs* made = [] {
    static MadeDirs dirs;  // destroyed at exit, after the tests
    return &dirs;
  }();
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/dtrain-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  made->Add(tmpl);
  return tmpl;
}

std::vector<std::string> ValuesAfter(const std::string& output, const std::string& key,
                                     const std::string& must_contain) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!must_contain.empty() && line.find(must_contain) == absl::string_view::npos) continue;
    size_t pos = line.find(key + "=");
    if (pos == absl::string_view::npos) continue;
    absl::string_view rest = line.substr(pos + key.size() + 1);
    size_t end = rest.find_first_of(" \t,");
    out.emplace_back(rest.substr(0, end));
  }
  return out;
}

}  // namespace dtrain::testing
