#include "services/scheduler/membership.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace dtrain::scheduler {
namespace {

// Waits are sliced so a cancelled RPC is noticed promptly.
constexpr absl::Duration kPollSlice = absl::Milliseconds(200);

bool Gone(NodeState s) { return s == NodeState::kDead || s == NodeState::kFinished; }

}  // namespace

Membership::Membership(MembershipOptions options)
    : options_(std::move(options)),
      liveness_(LivenessOptions{options_.heartbeat_timeout, options_.rejoin_timeout, options_.clock}),
      start_(liveness_.Now()),
      workers_(Role::kWorker, options_.elastic != nullptr ? options_.elastic->max_workers() : options_.num_workers),
      servers_(Role::kServer, options_.num_servers),
      job_(options_.job_id) {}

int Membership::Expected(Role role) const {
  if (role == Role::kWorker) return options_.num_workers;
  if (role == Role::kServer) return options_.num_servers;
  return 0;
}

int Membership::CountRegistered(Role role) const {
  int n = 0;
  for (const auto& [key, node] : nodes_) n += key.role == role ? 1 : 0;
  return n;
}

std::map<NodeKey, Membership::Node>::iterator Membership::FindTicket(uint64_t ticket) {
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
    if (it->second.ticket == ticket) return it;
  }
  return nodes_.end();
}

std::map<NodeKey, Membership::Node>::const_iterator Membership::FindTicket(uint64_t ticket) const {
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
    if (it->second.ticket == ticket) return it;
  }
  return nodes_.end();
}

absl::Status Membership::AdoptJobLocked(const std::string& job_id, bool survivor, const std::string& who) {
  std::string displaced;
  if (absl::Status s = job_.Claim(job_id, survivor, who, &displaced); !s.ok()) return s;
  if (displaced.empty()) return absl::OkStatus();
  // A survivor of the job outranks the new processes that reached this scheduler first
  // with another id: their registrations are withdrawn, and their waits say why.
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (it->second.job_id != displaced) {
      ++it;
      continue;
    }
    withdrawn_[it->second.ticket] = absl::FailedPreconditionError(
        absl::StrCat(NodeName(it->first), " (pid ", it->second.info.pid, ") belongs to job '", displaced,
                     "', but this scheduler runs job '", job_.id(), "': ", who,
                     ", which belonged to the job before this "
                     "scheduler started, says so"));
    it = nodes_.erase(it);
  }
  changed_.SignalAll();
  return absl::OkStatus();
}

void Membership::MarkAllRegisteredLocked() {
  all_registered_ = true;
  all_registered_at_ = Now();
  job_.Settle();
  if (restart_seen_at_ == absl::InfiniteFuture()) return;
  // This scheduler restarted into a running job. A new process that registered before
  // the survivors were all back replaces a process that died with the old scheduler:
  // it rejoins (a worker skips start-up and resumes at the job's step), and takes an
  // incarnation above any the servers admitted for its rank, since this scheduler's
  // own count was lost with it.
  for (auto& [key, node] : nodes_) {
    if (node.rejoined || node.assumed_finished) continue;
    const uint64_t incarnation = RanksLocked(key.role).Replace(key.rank);
    node.info.incarnation = incarnation;
    node.info.state = NodeState::kRejoining;
    node.info.restarts = node.info.restarts + 1;
    node.rejoined = true;
    comebacks_.push_back({key, incarnation});
  }
}

std::string Membership::JobId() const {
  absl::MutexLock lock(&mu_);
  return job_.id();
}

absl::Status Membership::CheckRegisterRequest(const Registration& request) const {
  const Role role = request.role;
  if (role != Role::kWorker && role != Role::kServer) {
    return absl::InvalidArgumentError(absl::StrCat("only servers and workers register, not ", RoleName(role)));
  }
  const std::string what = RoleName(role);
  if ((request.num_workers > 0 && request.num_workers != options_.num_workers) ||
      (request.num_servers > 0 && request.num_servers != options_.num_servers)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s was started for %d workers and %d servers, but the job has %d workers and %d servers", what,
                        request.num_workers, request.num_servers, options_.num_workers, options_.num_servers));
  }
  if (request.replication > 0 && request.replication != options_.replication) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s was started with --replication %d, but the job has --replication %d", what,
                        request.replication, options_.replication));
  }
  // workers_.size(), read without the lock: the worker ranks there are.
  const int worker_ranks = options_.elastic != nullptr ? options_.elastic->max_workers() : options_.num_workers;
  if (static_cast<int>(request.worker_incarnations.size()) > worker_ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " reported incarnations of ", request.worker_incarnations.size(), " worker ranks, but the job has ",
        workers_.size(), options_.elastic != nullptr ? " worker ranks (--elastic MAX)" : " workers"));
  }
  if (request.incarnation > 0 && request.requested_rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat("a ", what, " that holds incarnation ", request.incarnation,
                                                   " must register again with its rank"));
  }
  return absl::OkStatus();
}

bool Membership::HeldByLiveLocked(const NodeKey& key) const {
  auto it = nodes_.find(key);
  return it != nodes_.end() && it->second.info.state != NodeState::kDead && !it->second.assumed_finished;
}

RankOccupant Membership::OccupantOf(const Node& node) {
  RankOccupant o;
  o.present = true;
  o.live = node.info.state != NodeState::kDead && !node.assumed_finished;
  o.provisional = node.provisional;
  o.incarnation = node.info.incarnation;
  o.pid = node.info.pid;
  o.hostname = node.info.hostname;
  o.state = StateName(node.info.state);
  return o;
}

std::vector<RankOccupant> Membership::OccupantsLocked(Role role) const {
  // An elastic job's later ranks exist once it started with its first ones.
  std::vector<RankOccupant> out(all_registered_ ? (role == Role::kWorker ? workers_ : servers_).size()
                                                : Expected(role));
  for (const auto& [key, node] : nodes_) {
    if (key.role == role && key.rank >= 0 && key.rank < static_cast<int>(out.size())) out[key.rank] = OccupantOf(node);
  }
  return out;
}

absl::StatusOr<int> Membership::PickRankLocked(const Registration& request, bool* joiner) {
  const Role role = request.role;
  *joiner = false;
  if (options_.elastic != nullptr && role == Role::kWorker) {
    absl::StatusOr<std::optional<int>> joined = ElasticPickLocked(request);
    if (!joined.ok()) return joined.status();
    if (joined->has_value()) {
      *joiner = true;
      return **joined;
    }
  }
  RankTable& ranks = RanksLocked(role);
  int moved_to = -1;
  absl::StatusOr<int> rank =
      ranks.Pick(request.requested_rank, request.incarnation, all_registered_, OccupantsLocked(role), &moved_to);
  if (rank.status().code() == absl::StatusCode::kAlreadyExists && JobRunsLocked()) {
    // In a running job the holder is most likely the process this one replaces, dead
    // but not yet found so (one that registered again at this scheduler and died before
    // its heartbeat stream was back is found only by its silence): a transient refusal,
    // which the new process retries until the holder is declared dead.
    return absl::UnavailableError(absl::StrCat(rank.status().message(), "; this scheduler declares it dead after ",
                                               SecondsText(liveness_.heartbeat_timeout()),
                                               " without a heartbeat (--heartbeat-timeout)"));
  }
  if (rank.ok() && moved_to >= 0) {
    // The requested rank's provisional holder moves; before the job starts nobody is
    // fenced, so it is the new rank's first incarnation.
    auto holder = nodes_.find({role, *rank});
    Node moved = std::move(holder->second);
    nodes_.erase(holder);
    moved.info.rank = moved_to;
    moved.info.incarnation = ranks.Admit(moved_to, 0, /*started=*/false);
    nodes_[{role, moved_to}] = std::move(moved);
  }
  return rank;
}

bool Membership::JobRunsLocked() const {
  // Started here, or this scheduler restarted into a running job (a node that held an
  // incarnation registered again).
  return all_registered_ || restart_seen_at_ != absl::InfiniteFuture();
}

uint64_t Membership::AdmitLocked(const NodeKey& key, const Registration& request, bool joiner) {
  const uint64_t held = request.incarnation;
  // A node that held an incarnation before the job started here: this scheduler restarted.
  if (held > 0 && !all_registered_ && restart_seen_at_ == absl::InfiniteFuture()) restart_seen_at_ = Now();
  uint64_t replaced = 0;
  int restarts = 0;
  // The rank's epoch reports stay: a replacement continues its predecessor's epochs.
  std::vector<EpochFigures> recent_epochs;
  if (auto prev = nodes_.find(key); prev != nodes_.end()) {
    if (prev->second.info.incarnation != held) replaced = prev->second.info.incarnation;
    restarts = prev->second.info.restarts;
    recent_epochs = std::move(prev->second.info.recent_epochs);
  }
  const uint64_t incarnation = RanksLocked(key.role).Admit(key.rank, held, all_registered_);
  // A new process for a rank after the job started: a restart of that rank.
  const bool restart = all_registered_ && held == 0 && !joiner;
  Node& node = nodes_[key];
  node = Node();
  node.info.role = key.role;
  node.info.rank = key.rank;
  node.info.address = request.address;
  node.info.hostname = request.hostname;
  node.info.pid = request.pid;
  node.info.state = restart ? NodeState::kRejoining : NodeState::kRegistered;
  node.info.incarnation = incarnation;
  node.info.restarts = restarts + (restart ? 1 : 0);
  node.info.recent_epochs = std::move(recent_epochs);
  liveness_.Heard(&node.live);
  node.info.last_heard_unix_ms = absl::ToUnixMillis(node.live.last_heard);
  node.ticket = next_ticket_++;
  node.provisional = request.requested_rank < 0 && !all_registered_;
  node.rejoined = (all_registered_ || held > 0) && !joiner;
  node.replaced = replaced;
  node.job_id = request.job_id;
  for (size_t r = 0; r < request.worker_incarnations.size(); ++r) {
    workers_.NoteAdmittedElsewhere(static_cast<int>(r), request.worker_incarnations[r]);
  }
  if (restart) comebacks_.push_back({key, incarnation});
  return node.ticket;
}

absl::StatusOr<int> Membership::Register(const Registration& request, uint64_t* ticket) {
  if (absl::Status s = CheckRegisterRequest(request); !s.ok()) return s;
  const std::string what = RoleName(request.role);
  absl::MutexLock lock(&mu_);
  if (absl::Status s =
          AdoptJobLocked(request.job_id, request.incarnation > 0, absl::StrCat(what, " pid ", request.pid));
      !s.ok()) {
    return s;
  }
  bool joiner = false;
  absl::StatusOr<int> rank = PickRankLocked(request, &joiner);
  if (!rank.ok()) return rank.status();
  const uint64_t admitted = AdmitLocked({request.role, *rank}, request, joiner);
  if (ticket != nullptr) *ticket = admitted;
  if (!all_registered_ && CountRegistered(Role::kWorker) == options_.num_workers &&
      CountRegistered(Role::kServer) == options_.num_servers) {
    MarkAllRegisteredLocked();
  }
  changed_.SignalAll();
  return *rank;
}

absl::StatusOr<int> Membership::AwaitAllRegistered(uint64_t ticket, absl::Time deadline,
                                                   const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  absl::Status failure;
  while (!all_registered_) {
    if (auto w = withdrawn_.find(ticket); w != withdrawn_.end()) return w->second;
    if (closed_) {
      failure = close_status_;
    } else if (cancelled && cancelled()) {
      auto it = FindTicket(ticket);
      failure = absl::CancelledError(
          absl::StrCat(it == nodes_.end() ? "a node" : NodeName(it->first), " gave up waiting for registration"));
    } else if (absl::Now() >= deadline) {
      failure = absl::DeadlineExceededError(RegistrationTextLocked());
    }
    if (!failure.ok()) {
      auto it = FindTicket(ticket);
      if (it != nodes_.end()) nodes_.erase(it);
      changed_.SignalAll();
      return failure;
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + kPollSlice));
  }
  auto it = FindTicket(ticket);
  if (it == nodes_.end()) {
    if (auto w = withdrawn_.find(ticket); w != withdrawn_.end()) return w->second;
    return absl::FailedPreconditionError("this registration was replaced by a newer one for the same rank");
  }
  return it->first.rank;
}

absl::StatusOr<Membership::Admission> Membership::Admitted(uint64_t ticket) const {
  absl::MutexLock lock(&mu_);
  auto it = FindTicket(ticket);
  if (it == nodes_.end()) return absl::NotFoundError("this registration was replaced by a newer one");
  Admission a;
  a.node = it->second.info;
  a.rejoined = it->second.rejoined;
  a.replaced_incarnation = it->second.replaced;
  return a;
}

absl::Status Membership::AwaitAllRegistered(const NodeKey& self, absl::Time deadline,
                                            const std::function<bool()>& cancelled) {
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(self);
    if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat(NodeName(self), " is not registered"));
    ticket = it->second.ticket;
  }
  return AwaitAllRegistered(ticket, deadline, cancelled).status();
}

absl::Status Membership::Heartbeat(const NodeKey& key, uint64_t* incarnation, int64_t step, double samples_per_sec,
                                   bool resuming, bool* revived) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat(NodeName(key), " is not registered with this scheduler"));
  }
  Node& node = it->second;
  const uint64_t current = node.info.incarnation;
  if (*incarnation == 0) *incarnation = current;
  if (*incarnation < current) return absl::FailedPreconditionError(FencedText(key, *incarnation, node));
  if (*incarnation > current) {
    return absl::NotFoundError(absl::StrCat(NodeName(key), " incarnation ", *incarnation,
                                            " is not registered with this scheduler (it knows incarnation ", current,
                                            "); register again"));
  }
  if (node.info.state == NodeState::kDead) {
    if (!failure_.empty() || !MayRejoinLocked(key, node)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the scheduler declared ", NodeName(key), " dead (", node.live.death_reason, ")"));
    }
    // Paused, not gone (SIGSTOP, a long GC, a network partition): nobody took the
    // rank, so the process resumes.
    if (revived != nullptr) *revived = true;
    comebacks_.push_back({key, current});
    liveness_.Revived(&node.live);
    node.info.dead_since_unix_ms = {};
    node.info.death_reason = {};
    changed_.SignalAll();
  }
  if (node.info.state == NodeState::kFinished) return absl::OkStatus();
  node.info.state = resuming ? NodeState::kRejoining : NodeState::kAlive;
  node.info.last_step = step;
  node.info.samples_per_sec = samples_per_sec;
  liveness_.Heard(&node.live);
  node.info.last_heard_unix_ms = absl::ToUnixMillis(node.live.last_heard);
  return absl::OkStatus();
}

void Membership::RecordEpoch(const NodeKey& key, const EpochFigures& report) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end() || key.role != Role::kWorker) return;
  std::vector<EpochFigures>& recent = it->second.info.recent_epochs;
  // Every heartbeat repeats the newest report: one entry per epoch.
  if (!recent.empty() && recent.back().epoch == report.epoch) {
    recent.back() = report;
    return;
  }
  recent.push_back(report);
  if (recent.size() > kRecentEpochs) recent.erase(recent.begin(), recent.end() - kRecentEpochs);
}

absl::Status Membership::CheckCaller(const NodeKey& key, const std::string& job_id, uint64_t incarnation) const {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = job_.Check(job_id, NodeName(key)); !s.ok()) return s;
  auto it = nodes_.find(key);
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat(NodeName(key), " is not registered with this scheduler"));
  }
  const uint64_t current = it->second.info.incarnation;
  if (incarnation != 0 && incarnation < current) {
    return absl::FailedPreconditionError(FencedText(key, incarnation, it->second));
  }
  if (incarnation > current) {
    return absl::NotFoundError(absl::StrCat(NodeName(key), " incarnation ", incarnation,
                                            " is not registered with this scheduler; register again"));
  }
  return absl::OkStatus();
}

bool Membership::MayRejoinLocked(const NodeKey& key, const Node& node) const {
  return key.role == Role::kWorker && node.info.state == NodeState::kDead && liveness_.MayRejoin(node.live);
}

bool Membership::MayRejoin(const NodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  return it != nodes_.end() && failure_.empty() && MayRejoinLocked(key, it->second);
}

std::vector<NodeRecord> Membership::ExpireRejoinWaits() {
  absl::MutexLock lock(&mu_);
  std::vector<NodeRecord> expired;
  if (!liveness_.RejoinAllowed() || !failure_.empty() || options_.elastic != nullptr) return expired;
  for (const auto& [key, node] : nodes_) {
    if (key.role != Role::kWorker || node.info.state != NodeState::kDead || MayRejoinLocked(key, node)) {
      continue;
    }
    failure_ = absl::StrCat(NodeName(key), " died (", node.live.death_reason, ") and did not rejoin within ",
                            SecondsText(liveness_.rejoin_timeout()), " (--rejoin-timeout)");
    expired.push_back(node.info);
    changed_.SignalAll();
    break;  // the job failed: one reason is enough
  }
  return expired;
}

std::vector<NodeKey> Membership::SettleRestart() {
  absl::MutexLock lock(&mu_);
  std::vector<NodeKey> assumed;
  if (all_registered_ || restart_seen_at_ == absl::InfiniteFuture() ||
      Now() - restart_seen_at_ < options_.heartbeat_timeout || CountRegistered(Role::kServer) < options_.num_servers) {
    return assumed;
  }
  for (int r = 0; r < options_.num_workers; ++r) {
    const NodeKey key{Role::kWorker, r};
    if (nodes_.count(key) > 0) continue;
    Node& node = nodes_[key];
    node.info.role = key.role;
    node.info.rank = r;
    node.info.state = NodeState::kFinished;
    liveness_.Heard(&node.live);
    node.ticket = next_ticket_++;
    node.assumed_finished = true;
    assumed.push_back(key);
  }
  MarkAllRegisteredLocked();
  changed_.SignalAll();
  return assumed;
}

void Membership::MarkDead(Node& node, const std::string& why) {
  node.info.state = NodeState::kDead;
  liveness_.Died(&node.live, why);
  node.info.dead_since_unix_ms = absl::ToUnixMillis(node.live.dead_at);
  node.info.death_reason = why;
  deaths_.push_back({node.info.role, node.info.rank});
  changed_.SignalAll();
}

bool Membership::StreamClosed(const NodeKey& key, uint64_t incarnation, const std::string& why) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end() || it->second.info.incarnation != incarnation || Gone(it->second.info.state)) {
    return false;
  }
  MarkDead(it->second, why);
  return true;
}

absl::Status Membership::Leave(const NodeKey& key, bool failed, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat(NodeName(key), " is not registered with this scheduler"));
  }
  it->second.info.state = NodeState::kFinished;
  liveness_.Left(&it->second.live);
  if (failed && failure_.empty()) {
    failure_ = absl::StrCat(NodeName(key), " failed: ", reason.empty() ? "no reason given" : reason);
  }
  changed_.SignalAll();
  return absl::OkStatus();
}

std::vector<NodeRecord> Membership::SweepSilent() {
  absl::MutexLock lock(&mu_);
  std::vector<NodeRecord> dead;
  for (auto& [key, node] : nodes_) {
    const NodeState state = node.info.state;
    if (Gone(state)) continue;
    // A registered node is blocked in Register until everyone arrived; its silence
    // counts only from then.
    absl::Time counted_from = absl::InfinitePast();
    if (state == NodeState::kRegistered) {
      if (!all_registered_) continue;
      counted_from = all_registered_at_;
    }
    if (std::optional<absl::Duration> silence = liveness_.Overdue(node.live, counted_from)) {
      MarkDead(node, absl::StrCat("no heartbeat for ", SecondsText(*silence)));
      dead.push_back(node.info);
    }
  }
  return dead;
}

std::vector<NodeRecord> Membership::DeathsSince(size_t* cursor) const {
  absl::MutexLock lock(&mu_);
  std::vector<NodeRecord> out;
  for (; *cursor < deaths_.size(); ++*cursor) {
    auto it = nodes_.find(deaths_[*cursor]);
    if (it != nodes_.end() && it->second.info.state == NodeState::kDead) out.push_back(it->second.info);
  }
  return out;
}

std::vector<NodeRecord> Membership::RejoinsSince(size_t* cursor) const {
  absl::MutexLock lock(&mu_);
  std::vector<NodeRecord> out;
  for (; *cursor < comebacks_.size(); ++*cursor) {
    const Comeback& c = comebacks_[*cursor];
    auto it = nodes_.find(c.key);
    if (it != nodes_.end() && it->second.info.incarnation == c.incarnation &&
        it->second.info.state != NodeState::kDead) {
      out.push_back(it->second.info);
    }
  }
  return out;
}

ClusterShape Membership::View() const {
  absl::MutexLock lock(&mu_);
  ClusterShape view;
  view.num_workers = options_.num_workers;
  view.num_servers = options_.num_servers;
  view.kv_store = options_.kv_store;
  view.job_id = job_.id();
  view.replication = options_.replication;
  // std::map orders by (role, rank): servers come out sorted.
  for (const auto& [key, node] : nodes_) {
    if (key.role == Role::kServer) view.servers.push_back(node.info);
  }
  return view;
}

std::vector<NodeRecord> Membership::Nodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<NodeRecord> out;
  for (const auto& [key, node] : nodes_) out.push_back(node.info);
  return out;
}

std::optional<NodeRecord> Membership::Find(const NodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.info;
}

bool Membership::AllRegistered() const {
  absl::MutexLock lock(&mu_);
  return all_registered_;
}

void Membership::Close(absl::Status why) {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  close_status_ = std::move(why);
  changed_.SignalAll();
}

}  // namespace dtrain::scheduler
