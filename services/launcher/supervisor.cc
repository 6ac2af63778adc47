#include "services/launcher/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dtrain::launcher {
namespace {

// Exits are noticed by reaping, not by events: poll in short slices.
constexpr absl::Duration kSlice = absl::Milliseconds(100);
// A pipe still open this long after its child exited is held by a stray
// descendant; stop reading it rather than wait.
constexpr absl::Duration kPipeLinger = absl::Seconds(1);
// How long a child whose pipe closed gets to become reapable (it is exiting).
constexpr absl::Duration kReapWait = absl::Milliseconds(20);

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // e.g. our reader went away: output is lost, the job goes on
    off += static_cast<size_t>(n);
  }
}

// Sets (or replaces) one variable of a child's environment.
void SetEnv(ChildSpec& spec, const std::string& name, const std::string& value) {
  for (auto& [k, v] : spec.env) {
    if (k == name) {
      v = value;
      return;
    }
  }
  spec.env.emplace_back(name, value);
}

int KindRank(Role kind) {
  switch (kind) {
    case Role::kWorker: return 0;
    case Role::kServer: return 1;
    default: return 2;
  }
}

}  // namespace

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {}

Supervisor::~Supervisor() {
  for (auto& e : entries_) e.child->Signal(SIGKILL);
  entries_.clear();  // ~Child reaps
}

absl::Status Supervisor::Start(Role kind, const ChildSpec& spec) {
  ChildSpec first = spec;
  SetEnv(first, kRestartCountEnv, "0");
  auto child = Child::Start(first);
  if (!child.ok()) return child.status();
  Entry entry;
  entry.kind = kind;
  entry.child = std::move(child).value();
  entry.spec = std::move(first);
  entries_.push_back(std::move(entry));
  return absl::OkStatus();
}

absl::Status Supervisor::SetRestartSpec(Role kind, int index, ChildSpec spec) {
  Entry* e = FindEntry(kind, index);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat("no child ", spec.name, " to set a restart spec for"));
  e->spec = std::move(spec);
  return absl::OkStatus();
}

void Supervisor::HandleExits() {
  const absl::Time now = absl::Now();
  // A scheduler exits by itself only when the job is over, its verdict in the status
  // (a crash or a kill is a signal). Then nothing is restarted any more: a node that
  // failed with the job (a range that lost every replica, say) would only start a new
  // job that fails again, burying the first reason under its own.
  for (const auto& e : entries_) {
    if (e.kind == Role::kScheduler && e.child->exited() && e.child->term_signal() == 0 && !e.stopped_by_us) {
      job_over_ = true;
    }
  }
  for (auto& e : entries_) {
    if (!e.child->exited() || e.exit_judged) continue;
    e.exit_judged = true;
    if (e.stopped_by_us || e.child->succeeded() || stopping_ || !restarts_allowed_) continue;
    if (job_over_) {
      e.not_restarted = ", not restarted: the scheduler ended the job";
      continue;
    }
    ChildExit exit;
    exit.restartable_role = e.kind != Role::kServer || options_.restart_servers;
    exit.signal = e.child->term_signal();
    exit.status = e.child->exit_status();
    const RestartDecision d = DecideRestart(options_.restart, exit, e.restarts);
    if (!d.restart) {
      e.not_restarted = d.why_not;
      continue;
    }
    e.restart_at = now + d.delay;
    Message(absl::StrCat("restarting ", e.child->name(), " (", e.restarts + 1, " of ", options_.restart.max_restarts,
                         "): ", e.child->ExitReason(), "; starting it again in ", absl::FormatDuration(d.delay)));
  }
  if (options_.workers_may_leave) NoteLeaves(now);
  for (auto& e : entries_) {
    if (e.restart_pending() && job_over_) {
      e.restart_at = absl::InfiniteFuture();
      e.not_restarted = ", not restarted: the scheduler ended the job";
    }
    if (e.restart_pending() && now >= e.restart_at) Restart(e);
  }
}

void Supervisor::NoteLeaves(absl::Time now) {
  for (auto& e : entries_) {
    if (e.kind != Role::kWorker || e.leave_judged || !e.child->exited() || !e.child->succeeded()) continue;
    // The job ended (or is being stopped) before the notice was due: the worker
    // finished with it.
    if (job_over_ || stopping_) {
      e.leave_judged = true;
      continue;
    }
    if (now - e.child->exited_at() < options_.leave_notice_after) continue;
    e.leave_judged = true;
    Message(absl::StrCat(e.child->name(), " left (exit 0); not restarted"));
  }
}

void Supervisor::Restart(Entry& e) {
  e.restart_at = absl::InfiniteFuture();
  // The old incarnation and its group are gone (Reap killed the group), so its
  // pipe holds all it will ever say: pass that on before the new one speaks.
  Forward(e, /*flush=*/true);
  ChildSpec spec = e.spec;
  SetEnv(spec, kRestartCountEnv, std::to_string(e.restarts + 1));
  auto child = Child::Start(spec);
  if (!child.ok()) {
    e.not_restarted = absl::StrCat(", and restarting it failed: ", child.status().message());
    return;  // the old, failed incarnation stays: Failed() reports it
  }
  ++e.restarts;
  e.child = std::move(child).value();
  e.exit_judged = false;
  e.not_restarted.clear();
  Message(absl::StrCat(e.child->name(), " restarted as pid ", e.child->pid(), " (", kRestartCountEnv, "=", e.restarts,
                       ")"));
}

void Supervisor::Message(const std::string& text) const {
  WriteAll(options_.message_fd, absl::StrCat(options_.message_prefix, text, "\n"));
}

void Supervisor::Forward(Entry& entry, bool flush) {
  const std::string prefix = absl::StrCat("[", entry.child->name(), "] ");
  std::string out;
  entry.child->ReadOutput([&](absl::string_view line) { absl::StrAppend(&out, prefix, line, "\n"); }, flush);
  if (!out.empty()) WriteAll(options_.output_fd, out);
  // The pipe closes as the child exits, a few microseconds before it can be
  // reaped. Reap it now: when one failure brings down others, the exit order
  // is how the first one is named.
  if (entry.child->output_fd() < 0 && !entry.child->exited()) {
    const absl::Time until = absl::Now() + kReapWait;
    while (!entry.child->Reap() && absl::Now() < until) absl::SleepFor(absl::Microseconds(100));
  }
}

void Supervisor::Pump(absl::Duration timeout) {
  std::vector<pollfd> fds;
  std::vector<Entry*> owners;
  for (auto& e : entries_) {
    if (e.child->output_fd() < 0) continue;
    fds.push_back(pollfd{e.child->output_fd(), POLLIN, 0});
    owners.push_back(&e);
  }
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(std::max(absl::ZeroDuration(), std::min(timeout, kSlice))));
  if (fds.empty()) {
    ::poll(nullptr, 0, ms);
  } else if (::poll(fds.data(), fds.size(), ms) > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0) Forward(*owners[i], false);
    }
  }
  const absl::Time now = absl::Now();
  for (auto& e : entries_) {
    e.child->Reap();
    if (e.child->exited() && e.child->output_fd() >= 0 && now - e.child->exited_at() > kPipeLinger) {
      Forward(e, /*flush=*/true);
    }
  }
  HandleExits();
}

bool Supervisor::AllExited(bool workers_only) const {
  for (const auto& e : entries_) {
    if (workers_only && e.kind != Role::kWorker) continue;
    if (!Over(e)) return false;
  }
  return true;
}

bool Supervisor::SchedulerOver() const {
  for (const auto& e : entries_) {
    if (e.kind == Role::kScheduler && !Over(e)) return false;
  }
  return true;
}

const Child* Supervisor::Failed() const {
  const Entry* e = FailedEntry();
  return e == nullptr ? nullptr : e->child.get();
}

const Supervisor::Entry* Supervisor::FailedEntry() const {
  const Entry* worst = nullptr;
  for (const auto& e : entries_) {
    if (e.stopped_by_us || !Over(e) || e.child->succeeded()) continue;
    if (worst == nullptr || KindRank(e.kind) < KindRank(worst->kind) ||
        (KindRank(e.kind) == KindRank(worst->kind) && e.child->exited_at() < worst->child->exited_at())) {
      worst = &e;
    }
  }
  return worst;
}

Supervisor::Entry* Supervisor::FindEntry(Role kind, int index) {
  for (auto& e : entries_) {
    if (e.kind == kind && index-- == 0) return &e;
  }
  return nullptr;
}

const Child* Supervisor::Find(Role kind, int index) const {
  for (const auto& e : entries_) {
    if (e.kind == kind && index-- == 0) return e.child.get();
  }
  return nullptr;
}

int Supervisor::Restarts(Role kind, int index) const {
  for (const auto& e : entries_) {
    if (e.kind == kind && index-- == 0) return e.restarts;
  }
  return -1;
}

void Supervisor::StopAll() {
  stopping_ = true;
  for (auto& e : entries_) {
    e.restart_at = absl::InfiniteFuture();
    if (e.child->exited()) continue;
    e.stopped_by_us = true;
    e.child->Signal(SIGTERM);
  }
  const absl::Time deadline = absl::Now() + options_.stop_grace;
  while (!AllExited(false) && absl::Now() < deadline) Pump(kSlice);
  for (auto& e : entries_) {
    if (e.child->exited()) continue;
    Message(absl::StrCat(e.child->name(), " did not exit within ", absl::FormatDuration(options_.stop_grace),
                         " of SIGTERM; killing it"));
    e.child->Signal(SIGKILL);
  }
  // SIGKILL cannot be ignored; the bound only guards against a kernel hang (D state).
  const absl::Time kill_deadline = absl::Now() + absl::Seconds(5);
  while (!AllExited(false) && absl::Now() < kill_deadline) Pump(kSlice);
  DrainAll();
}

void Supervisor::DrainAll() {
  const absl::Time deadline = absl::Now() + kPipeLinger + kSlice;
  auto open = [&] {
    return std::any_of(entries_.begin(), entries_.end(), [](const Entry& e) { return e.child->output_fd() >= 0; });
  };
  while (open() && absl::Now() < deadline) Pump(kSlice);
  for (auto& e : entries_) Forward(e, /*flush=*/true);
}

int Supervisor::Run() {
  absl::Time workers_done_at = absl::InfiniteFuture();
  while (true) {
    if (const int sig = options_.pending_signal ? options_.pending_signal() : 0; sig != 0) {
      const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : ::strsignal(sig);
      Message(absl::StrCat("received ", name, "; stopping the job"));
      StopAll();
      return 128 + sig;
    }
    Pump(kSlice);
    if (const Entry* failed = FailedEntry()) {
      const std::string what =
          absl::StrCat(failed->child->name(), " ", failed->child->DescribeExit(), failed->not_restarted);
      StopAll();
      Message(what + "; stopped the others");
      return 1;
    }
    if (!AllExited(/*workers_only=*/true)) continue;
    if (options_.workers_may_leave && !SchedulerOver()) continue;
    if (AllExited(false)) {
      DrainAll();
      return 0;
    }
    const absl::Time now = absl::Now();
    if (workers_done_at == absl::InfiniteFuture()) workers_done_at = now;
    if (now - workers_done_at > options_.finish_grace) {
      for (const auto& e : entries_) {
        if (e.child->exited()) continue;
        Message(absl::StrCat(e.child->name(), " still runs ", absl::FormatDuration(options_.finish_grace),
                             " after the workers finished; stopping it"));
      }
      StopAll();
      return 0;
    }
  }
}

}  // namespace dtrain::launcher
