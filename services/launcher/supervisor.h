// Runs the processes of a local job the way `dtrain launch` promises: every
// line of output prefixed with its source, the first failure stops the rest, a
// signal stops everyone, and nothing is left running afterwards.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/launcher/child_process.h"

namespace dtrain::launcher {

enum class ChildKind { kScheduler, kServer, kWorker };

struct SupervisorOptions {
  absl::Duration stop_grace = absl::Seconds(10);    // SIGTERM, then SIGKILL after this
  absl::Duration finish_grace = absl::Seconds(30);  // after the workers, others must exit within this
  int output_fd = 1;                                // where prefixed child output goes
  int message_fd = 2;                               // where the launcher's own messages go
  // A signal number once the launcher was asked to stop (SIGINT, SIGTERM), else 0.
  std::function<int()> pending_signal;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();  // kills and reaps whatever still runs

  absl::Status Start(ChildKind kind, const ChildSpec& spec);

  // Forwards output and reaps exited children for up to `timeout`; returns early
  // when a child exits or a signal arrives.
  void Pump(absl::Duration timeout);

  // The child that failed (exited non-zero or by a signal not sent by us), if any;
  // a worker is preferred, as it is the likelier cause when several fail together.
  const Child* Failed() const;
  const Child* Find(ChildKind kind, int index) const;

  // Runs until the job ends. Returns 0 when every worker exited 0 (stragglers
  // are killed after finish_grace, with a message), 1 after a failure (the others
  // are stopped: "dtrain launch: worker 1 exited with status 3; stopped the
  // others"), 128+signal when asked to stop.
  int Run();

  // SIGTERM to everyone still running; SIGKILL after stop_grace.
  void StopAll();

  // "dtrain launch: " + text, on the message fd.
  void Message(const std::string& text) const;

 private:
  struct Entry {
    ChildKind kind;
    std::unique_ptr<Child> child;
    bool stopped_by_us = false;  // its exit is ours, not a failure
  };
  bool AllExited(bool workers_only) const;
  void Forward(Entry& entry, bool flush);
  // Reads the pipes of exited children to their end (bounded), flushing partial lines.
  void DrainAll();

  const SupervisorOptions options_;
  std::vector<Entry> entries_;
};

}  // namespace dtrain::launcher
