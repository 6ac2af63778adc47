// `dtrain status --scheduler HOST:PORT [--watch]`: where every rank of a running job
// is, from the scheduler's GetStatus: per-rank progress when there is no Kubernetes
// (and no Prometheus) to ask.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/net_address.h"
#include "common/scheduler_client.h"
#include "common/tls/tls_flags.h"
#include "services/launcher/commands.h"
#include "services/launcher/status_table.h"

namespace dtrain::launcher {
namespace {

struct StatusFlags {
  std::string scheduler;
  bool watch = false;
  double interval_s = 2;
  int64_t count = 0;  // frames to print with --watch; 0: until interrupted
  double timeout_s = 5;
};

absl::Status ParseStatusFlags(const std::vector<std::string>& args, StatusFlags* f, bool* help) {
  FlagSet flags("dtrain status",
                "Prints a table of a running job's nodes (role, rank, address, state, incarnation,\n"
                "restarts, step, samples/s, last heard or since when and why dead) from its scheduler.\n"
                "Usage: dtrain status --scheduler HOST:PORT [--watch]");
  flags.AddString("scheduler", &f->scheduler, "the scheduler's host:port", {"DTRAIN_SCHEDULER_ADDR"});
  flags.AddBool("watch", &f->watch, "refresh the table every --interval seconds until Ctrl-C");
  flags.AddDouble("interval", &f->interval_s, "seconds between refreshes with --watch");
  flags.AddInt("count", &f->count, "with --watch: stop after this many tables (0: never)");
  flags.AddDouble("timeout", &f->timeout_s, "seconds to wait for the scheduler's answer");
  TlsFlags tls;
  AddTlsFlags(flags, &tls);  // a --tls job's scheduler wants a certificate from its CA
  absl::Status s = flags.Parse(args);
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok() || *help) return s;
  if (f->scheduler.empty()) {
    return absl::InvalidArgumentError("--scheduler HOST:PORT is required (or set DTRAIN_SCHEDULER_ADDR)");
  }
  if (absl::StatusOr<HostPort> hp = SplitHostPort(f->scheduler); !hp.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--scheduler: ", hp.status().message()));
  }
  if (!(f->interval_s > 0)) return absl::InvalidArgumentError("--interval must be > 0");
  if (!(f->timeout_s > 0)) return absl::InvalidArgumentError("--timeout must be > 0");
  if (f->count < 0) return absl::InvalidArgumentError("--count must be >= 0");
  return ApplyTlsFlags(tls, TlsUse::kClusterNode, /*listen_host=*/"");
}

}  // namespace

int StatusCommand(const std::vector<std::string>& args) {
  StatusFlags f;
  bool help = false;
  if (absl::Status s = ParseStatusFlags(args, &f, &help); !s.ok() || help) {
    if (!s.ok()) std::fprintf(stderr, "dtrain status: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 2;
  }
  SchedulerClient client(f.scheduler);
  const bool clear = f.watch && ::isatty(STDOUT_FILENO);
  for (int64_t frame = 1;; ++frame) {
    absl::StatusOr<v1::GetStatusResponse> status = client.GetStatus(absl::Seconds(f.timeout_s));
    if (!status.ok()) {
      // A finished job's scheduler is gone: in --watch too, this is the end.
      std::fprintf(stderr, "dtrain status: no answer from the scheduler at %s: %s\n", f.scheduler.c_str(),
                   std::string(status.status().message()).c_str());
      return 1;
    }
    const std::string table = FormatStatus(*status, f.scheduler);
    std::string text = clear ? "\033[H\033[2J" : (frame > 1 ? "\n" : "");
    if (f.watch) absl::StrAppend(&text, absl::FormatTime("%H:%M:%S  ", absl::Now(), absl::LocalTimeZone()));
    absl::StrAppend(&text, table);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    if (!f.watch || (f.count > 0 && frame >= f.count)) return 0;
    absl::SleepFor(absl::Seconds(f.interval_s));
  }
}

}  // namespace dtrain::launcher
