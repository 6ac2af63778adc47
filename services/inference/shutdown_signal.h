// SIGTERM / SIGINT as an event main can wait for with a timeout.
//
// The signals are blocked in every thread and taken by one thread with sigtimedwait, so
// there is no async-signal handler to get wrong. Construct it first in main, before
// gRPC or LibTorch start threads, so that they inherit the blocked mask.
#pragma once

#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dtrain::inference {

class ShutdownSignal {
 public:
  ShutdownSignal();
  ~ShutdownSignal();
  ShutdownSignal(const ShutdownSignal&) = delete;
  ShutdownSignal& operator=(const ShutdownSignal&) = delete;

  // "SIGTERM" or "SIGINT" once one arrived; "" if none within `timeout`.
  std::string WaitFor(absl::Duration timeout);

 private:
  void Loop();

  sigset_t signals_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::string received_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace dtrain::inference
