// Why a process should stop: SIGTERM / SIGINT, or a reason given from inside (the
// scheduler ending the job), as an event main can wait for, with or without a timeout.
//
// A handler that only writes the signal's number to a pipe, read by one thread of its
// own: nothing else runs in signal context. The signals are also blocked in the thread
// that constructs it and in every thread started after, so the handler rarely
// interrupts anyone; threads a library started before main (OpenBLAS's pool) may still
// take a signal, and then the handler, not the default action, runs there. Construct it
// first in main, before gRPC or LibTorch start threads.
#pragma once

#include <signal.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dtrain {

class ShutdownSignal {
 public:
  ShutdownSignal();
  ~ShutdownSignal();
  ShutdownSignal(const ShutdownSignal&) = delete;
  ShutdownSignal& operator=(const ShutdownSignal&) = delete;

  // Asks to stop for `reason`, unless a reason (or a signal) came first.
  void Request(const std::string& reason);

  // While on, a signal ends the process at once with exit code 0, after logging
  // "stopping (SIGTERM) <when>": for a call that may block for minutes and leaves
  // nothing to undo (a server's Register). Turned on after a signal already came, it
  // ends the process at once.
  void set_exit_on_signal(bool exit, const std::string& when = "");

  // "SIGTERM", "SIGINT" or the requested reason once there is one; "" if none within
  // `timeout`.
  std::string WaitFor(absl::Duration timeout);
  // Blocks until there is a reason (a daemon's main wait), and returns it.
  std::string Wait();

 private:
  void Loop();

  int pipe_[2] = {-1, -1};  // the handler writes [1], Loop reads [0]
  struct sigaction old_term_ {};
  struct sigaction old_int_ {};
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  std::string signal_ ABSL_GUARDED_BY(mu_);  // the first signal's name; "" before one
  bool exit_on_signal_ ABSL_GUARDED_BY(mu_) = false;
  std::string exit_when_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace dtrain
