#include "services/launcher/restart_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace dtrain::launcher {

absl::StatusOr<RestartOn> ParseRestartOn(absl::string_view text) {
  if (text == "failure") return RestartOn::kFailure;
  if (text == "signal") return RestartOn::kSignal;
  return absl::InvalidArgumentError(
      absl::StrCat("must be 'failure' (any non-zero exit) or 'signal' (killed by a signal), not '", text, "'"));
}

std::string RestartOnName(RestartOn on) { return on == RestartOn::kSignal ? "signal" : "failure"; }

RestartDecision DecideRestart(const RestartPolicy& policy, const ChildExit& exit, int restarts) {
  RestartDecision d;
  const bool failed = exit.signal != 0 || exit.status != 0;
  if (!failed || policy.max_restarts <= 0) return d;
  if (!exit.restartable_role) {
    d.why_not = ", not restarted (a server is not restarted yet: its shards would be lost)";
    return d;
  }
  if (policy.on == RestartOn::kSignal && exit.signal == 0) {
    d.why_not = ", not restarted (--restart-on signal: only a death by a signal is)";
    return d;
  }
  if (restarts >= policy.max_restarts) {
    d.why_not = absl::StrCat(" after ", restarts, restarts == 1 ? " restart" : " restarts", " (--max-restarts ",
                             policy.max_restarts, ")");
    return d;
  }
  d.restart = true;
  d.delay = policy.backoff;
  for (int i = 0; i < restarts && d.delay < kMaxRestartBackoff; ++i) d.delay *= 2;
  d.delay = std::min(d.delay, kMaxRestartBackoff);
  return d;
}

}  // namespace dtrain::launcher
