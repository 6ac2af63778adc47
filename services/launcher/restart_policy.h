// When `dtrain launch --max-restarts N` restarts a child that failed, and after how
// long. Pure decisions, no processes: the Supervisor acts on them.
//
// The budget is per child, not per job (torchrun's max_restarts counts restarts of
// the whole worker group, because torchrun restarts the group together). Here only
// the failed child restarts, with its role and rank, while the others keep running;
// a per-child budget keeps one flaky rank from using up the restarts of the others,
// and "restarting worker 1 (2 of 3)" then reads as that rank's history. A job as a
// whole restarts at most N times per restartable child.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/defaults.h"

namespace dtrain::launcher {

// Which failures a restart may cure.
enum class RestartOn {
  // Any non-zero exit or signal (torchrun's behaviour).
  kFailure,
  // Only deaths by a signal we did not send (SIGKILL by the OOM killer or a
  // preemption, SIGSEGV): a process that exits with a status chose to, e.g. bad
  // flags or NaN loss, and would fail again the same way.
  kSignal,
};

// "failure" or "signal"; anything else is INVALID_ARGUMENT naming both (the flag
// layer prefixes "--restart-on: ").
absl::StatusOr<RestartOn> ParseRestartOn(absl::string_view text);
std::string RestartOnName(RestartOn on);

struct RestartPolicy {
  int max_restarts = 0;  // per child; 0: a failure ends the job, as before
  RestartOn on = RestartOn::kFailure;
  // Before the first restart of a child; doubled for each further one, up to
  // kMaxRestartBackoff. The pause lets the scheduler see the old incarnation's
  // heartbeat stream break (so the rank is free to take again), lets the OS free
  // the port of a scheduler, and keeps a crash loop from spinning.
  absl::Duration backoff = absl::Seconds(kDefaultRestartBackoffSeconds);
};

inline constexpr absl::Duration kMaxRestartBackoff = absl::Seconds(30);

// How a child ended, as far as the policy cares.
struct ChildExit {
  bool restartable_role = false;  // workers and the scheduler; servers not yet
  int signal = 0;                 // the signal that killed it, 0 when it exited
  int status = 0;                 // its exit status, when signal == 0
};

struct RestartDecision {
  bool restart = false;
  absl::Duration delay;  // when restart: wait this long first
  // When !restart although restarts are on: why not, appended to the failure
  // message "worker 1 was killed by signal 9 (Killed)": " after 3 restarts
  // (--max-restarts 3)", ", not restarted (...)". Empty when restarts are off.
  std::string why_not;
};

// `restarts` is how often this child was restarted already. A successful exit is
// never restarted.
RestartDecision DecideRestart(const RestartPolicy& policy, const ChildExit& exit, int restarts);

}  // namespace dtrain::launcher
