#include "common/shutdown_signal.h"

#include <cstdlib>
#include <ctime>

#include "common/log.h"

namespace dtrain {

ShutdownSignal::ShutdownSignal() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  thread_ = std::thread([this] { Loop(); });
}

ShutdownSignal::~ShutdownSignal() {
  stop_.store(true);
  thread_.join();
}

void ShutdownSignal::Request(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (reason_.empty()) reason_ = reason;
}

void ShutdownSignal::set_exit_on_signal(bool exit, const std::string& when) {
  absl::MutexLock lock(&mu_);
  exit_on_signal_ = exit;
  exit_when_ = when;
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
    timespec tick{0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&signals_, nullptr, &tick);
    if (sig != SIGTERM && sig != SIGINT) continue;
    const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    absl::MutexLock lock(&mu_);
    if (exit_on_signal_) {
      DTRAIN_LOG(INFO) << "stopping (" << name << ") " << exit_when_;
      std::_Exit(0);
    }
    if (reason_.empty()) reason_ = name;
  }
}

}  // namespace dtrain
