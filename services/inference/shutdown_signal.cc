#include "services/inference/shutdown_signal.h"

#include <ctime>

namespace dtrain::inference {

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

std::string ShutdownSignal::WaitFor(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto received = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !received_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&received), timeout);
  return received_;
}

void ShutdownSignal::Loop() {
  // A short tick so the destructor's stop_ is seen promptly.
  while (!stop_.load()) {
    timespec tick{0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&signals_, nullptr, &tick);
    if (sig != SIGTERM && sig != SIGINT) continue;
    absl::MutexLock lock(&mu_);
    if (received_.empty()) received_ = sig == SIGTERM ? "SIGTERM" : "SIGINT";
  }
}

}  // namespace dtrain::inference
