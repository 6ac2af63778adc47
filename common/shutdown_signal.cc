#include "common/shutdown_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/log.h"

namespace dtrain {
namespace {

// The write end of the pipe the handler reports to. One ShutdownSignal per process (main
// makes it); a second one takes the handler over.
std::atomic<int> g_signal_pipe{-1};

// Runs in whichever thread the kernel picked; only async-signal-safe calls here. A full
// pipe (signals far faster than Loop reads them) drops the extra byte, which loses
// nothing: one signal is enough to stop.
void OnSignal(int sig) {
  const int saved_errno = errno;
  const int fd = g_signal_pipe.load();
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

sigset_t StopSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  return s;
}

}  // namespace

ShutdownSignal::ShutdownSignal() {
  // A handler, not only a blocked mask: threads that a shared library starts while it is
  // loaded, before main runs (OpenBLAS's pthread pool does), keep the default mask, and
  // the kernel may hand them the signal, whose default action would end the process.
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    DTRAIN_LOG(ERROR) << "shutdown signal: pipe2 failed (errno " << errno << ")";
    std::abort();  // out of file descriptors before main did anything: nothing to save
  }
  g_signal_pipe.store(pipe_[1]);
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, &old_term_);
  sigaction(SIGINT, &action, &old_int_);
  // Blocked as well in this thread and every thread it starts from now on, so that the
  // handler runs in few places and interrupts no system call of gRPC's or LibTorch's.
  const sigset_t signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  thread_ = std::thread([this, signals] {
    // The one thread of ours that takes the signals.
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    Loop();
  });
}

ShutdownSignal::~ShutdownSignal() {
  stop_.store(true);
  thread_.join();
  // Back to the old handlers; a signal meanwhile finds no pipe and is dropped.
  int expected = pipe_[1];
  g_signal_pipe.compare_exchange_strong(expected, -1);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void ShutdownSignal::Request(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (reason_.empty()) reason_ = reason;
}

void ShutdownSignal::set_exit_on_signal(bool exit, const std::string& when) {
  absl::MutexLock lock(&mu_);
  exit_on_signal_ = exit;
  exit_when_ = when;
  // A signal that came before the blocking call it guards would otherwise wait out
  // that call (a server restarted just as the job ended sat in Register until the
  // launcher's kill grace ran out): it ends the process now, as it would have then.
  if (exit && !signal_.empty()) {
    DTRAIN_LOG(INFO) << "stopping (" << signal_ << ") " << exit_when_;
    std::_Exit(0);
  }
}

std::string ShutdownSignal::WaitFor(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto has_reason = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !reason_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&has_reason), timeout);
  return reason_;
}

std::string ShutdownSignal::Wait() {
  absl::MutexLock lock(&mu_);
  auto has_reason = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !reason_.empty(); };
  mu_.Await(absl::Condition(&has_reason));
  return reason_;
}

void ShutdownSignal::Loop() {
  // A short tick so the destructor's stop_ is seen promptly.
  while (!stop_.load()) {
    pollfd readable{pipe_[0], POLLIN, 0};
    if (::poll(&readable, 1, 100) <= 0) continue;
    unsigned char byte = 0;
    if (::read(pipe_[0], &byte, 1) != 1) continue;
    const int sig = byte;
    if (sig != SIGTERM && sig != SIGINT) continue;
    const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    absl::MutexLock lock(&mu_);
    if (signal_.empty()) signal_ = name;
    if (exit_on_signal_) {
      DTRAIN_LOG(INFO) << "stopping (" << name << ") " << exit_when_;
      std::_Exit(0);
    }
    if (reason_.empty()) reason_ = name;
  }
}

}  // namespace dtrain
