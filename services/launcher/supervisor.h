// Runs the processes of a local job the way `dtrain launch` promises: every
// line of output prefixed with its source, the first failure stops the rest, a
// signal stops everyone, and nothing is left running afterwards. With a restart
// policy (--max-restarts), a failed worker or scheduler is first started again
// with the same spec (role, rank, port) while the others keep running.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/defaults.h"
#include "common/role.h"
#include "services/launcher/child_process.h"
#include "services/launcher/restart_policy.h"

namespace dtrain::launcher {

struct SupervisorOptions {
  absl::Duration stop_grace = absl::Seconds(kDefaultStopGraceSeconds);      // SIGTERM, then SIGKILL after this
  absl::Duration finish_grace = absl::Seconds(kDefaultFinishGraceSeconds);  // after the workers, others must exit
  int output_fd = 1;                                                        // where prefixed child output goes
  int message_fd = 2;                                                       // where the launcher's own messages go
  std::string message_prefix = "dtrain launch: ";  // before each of them (`dtrain run` says its own name)
  // A signal number once the launcher was asked to stop (SIGINT, SIGTERM), else 0.
  std::function<int()> pending_signal;
  // Applies once AllowRestarts was called; max_restarts 0: never.
  RestartPolicy restart;
  // Servers are restarted too: with --replication > 1 their ranges have other copies,
  // with --snapshot-every the job rolls back to their snapshots. Otherwise a
  // new server would hold nothing, so a server's failure ends the job.
  bool restart_servers = false;
  // An elastic job (--elastic): a worker may leave on purpose, exiting 0 while the job
  // goes on, and workers started elsewhere may join it. A worker's exit 0 is then
  // announced as a leave ("worker 2 left (exit 0); not restarted") once the scheduler
  // still runs leave_notice_after later (a finished job's scheduler ends well within
  // that after its last worker; those workers finished, they did not leave), and the
  // job ends when the scheduler ends it, not when the workers started here are gone:
  // others may still be training.
  bool workers_may_leave = false;
  absl::Duration leave_notice_after = absl::Seconds(5);
};

// Each child's environment carries how often it was restarted: 0 for the first
// start. A restarted worker or scheduler reads it to know it rejoins a running job
// (torchrun: TORCHELASTIC_RESTART_COUNT).
inline constexpr char kRestartCountEnv[] = "DTRAIN_RESTART_COUNT";

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();  // kills and reaps whatever still runs

  // Starts a child; `spec` is also what a restart starts again.
  absl::Status Start(Role kind, const ChildSpec& spec);
  // What a restart of the index-th child of `kind` starts instead of its first spec,
  // e.g. the scheduler with the port it got, so that everyone can find it again.
  absl::Status SetRestartSpec(Role kind, int index, ChildSpec spec);
  // From now on, failures go through options.restart. Before, the job is still
  // starting, and a child that fails then has a setup problem no restart cures.
  void AllowRestarts() { restarts_allowed_ = true; }

  // Forwards output and reaps exited children for up to `timeout`; returns early
  // when a child exits or a signal arrives.
  void Pump(absl::Duration timeout);

  // The child that failed (exited non-zero or by a signal not sent by us) and will
  // not be restarted, if any; a worker is preferred, as it is the likelier cause
  // when several fail together.
  const Child* Failed() const;
  // The current incarnation of the index-th child of `kind`.
  const Child* Find(Role kind, int index) const;
  // How often that child was restarted so far (-1: no such child).
  int Restarts(Role kind, int index) const;

  // Runs until the job ends. Returns 0 when every worker exited 0 (stragglers
  // are killed after finish_grace, with a message; with workers_may_leave, once the
  // scheduler has ended the job too), 1 after a failure that is not
  // restarted (the others are stopped: "dtrain launch: worker 1 exited with status
  // 3; stopped the others", "... was killed by signal 9 (Killed) after 3 restarts
  // (--max-restarts 3); stopped the others"), 128+signal when asked to stop.
  int Run();

  // SIGTERM to everyone still running; SIGKILL after stop_grace. Cancels pending restarts.
  void StopAll();

  // options.message_prefix + text, on the message fd.
  void Message(const std::string& text) const;

 private:
  struct Entry {
    Role kind;
    std::unique_ptr<Child> child;
    ChildSpec spec;              // what a restart starts
    bool stopped_by_us = false;  // its exit is ours, not a failure
    bool exit_judged = false;    // the restart policy has seen this incarnation's exit
    int restarts = 0;
    absl::Time restart_at = absl::InfiniteFuture();  // a restart is due then
    std::string not_restarted;                       // why not, for the failure message (RestartDecision::why_not)
    bool leave_judged = false;                       // workers_may_leave: its exit 0 was judged a leave or not
    bool restart_pending() const { return restart_at != absl::InfiniteFuture(); }
  };
  // Exited, and no restart pending.
  static bool Over(const Entry& e) { return e.child->exited() && !e.restart_pending(); }
  bool AllExited(bool workers_only) const;
  // The scheduler has exited and will not be restarted (true when there is none).
  bool SchedulerOver() const;
  // workers_may_leave: announces the workers whose exit 0 turned out to be a leave.
  void NoteLeaves(absl::Time now);
  const Entry* FailedEntry() const;
  Entry* FindEntry(Role kind, int index);
  // Judges new exits by the restart policy, then restarts those that are due.
  void HandleExits();
  void Restart(Entry& entry);
  void Forward(Entry& entry, bool flush);
  // Reads the pipes of exited children to their end (bounded), flushing partial lines.
  void DrainAll();

  const SupervisorOptions options_;
  std::vector<Entry> entries_;
  bool restarts_allowed_ = false;
  bool job_over_ = false;  // the scheduler exited by itself: restart nothing any more
  bool stopping_ = false;  // StopAll began: no more restarts
};

}  // namespace dtrain::launcher
