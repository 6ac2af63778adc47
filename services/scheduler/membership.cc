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

bool Gone(v1::NodeState s) { return s == v1::NODE_STATE_DEAD || s == v1::NODE_STATE_FINISHED; }

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d)); }

}  // namespace

std::string RoleName(v1::Role role) {
  switch (role) {
    case v1::ROLE_WORKER: return "worker";
    case v1::ROLE_SERVER: return "server";
    case v1::ROLE_SCHEDULER: return "scheduler";
    default: return "unknown-role";
  }
}

std::string NodeName(const NodeKey& key) { return absl::StrCat(RoleName(key.role), " ", key.rank); }

Membership::Membership(MembershipOptions options)
    : options_([&] {
        if (!options.clock) options.clock = [] { return absl::Now(); };
        return std::move(options);
      }()),
      start_(options_.clock()) {}

int Membership::Expected(v1::Role role) const {
  if (role == v1::ROLE_WORKER) return options_.num_workers;
  if (role == v1::ROLE_SERVER) return options_.num_servers;
  return 0;
}

int Membership::CountRegistered(v1::Role role) const {
  int n = 0;
  for (const auto& [key, node] : nodes_) n += key.role == role ? 1 : 0;
  return n;
}

std::map<NodeKey, Membership::Node>::iterator Membership::FindTicket(uint64_t incarnation) {
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
    if (it->second.incarnation == incarnation) return it;
  }
  return nodes_.end();
}

absl::StatusOr<int> Membership::Register(const v1::RegisterRequest& request, uint64_t* ticket) {
  const v1::Role role = request.role();
  if (role != v1::ROLE_WORKER && role != v1::ROLE_SERVER) {
    return absl::InvalidArgumentError(absl::StrCat("only servers and workers register, not ", RoleName(role)));
  }
  const std::string what = RoleName(role);
  if ((request.num_workers() > 0 && request.num_workers() != options_.num_workers) ||
      (request.num_servers() > 0 && request.num_servers() != options_.num_servers)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s was started for %d workers and %d servers, but the job has %d workers and %d servers", what,
        request.num_workers(), request.num_servers(), options_.num_workers, options_.num_servers));
  }
  const int expected = Expected(role);
  absl::MutexLock lock(&mu_);
  auto held_by_live = [&](int rank) {
    auto it = nodes_.find({role, rank});
    return it != nodes_.end() && it->second.info.state() != v1::NODE_STATE_DEAD;
  };
  int rank = request.requested_rank();
  if (rank >= 0) {
    if (rank >= expected) {
      return absl::InvalidArgumentError(absl::StrCat("requested ", what, " rank ", rank, " but the job has ",
                                                     expected, " ", what, "s (ranks 0..", expected - 1, ")"));
    }
    auto holder = nodes_.find({role, rank});
    if (holder != nodes_.end() && holder->second.provisional && !all_registered_) {
      // Its holder did not ask for it: move that node to another free rank.
      int free_rank = -1;
      for (int r = 0; r < expected && free_rank < 0; ++r) {
        if (nodes_.count({role, r}) == 0) free_rank = r;
      }
      if (free_rank >= 0) {
        Node moved = std::move(holder->second);
        nodes_.erase(holder);
        moved.info.set_rank(free_rank);
        nodes_[{role, free_rank}] = std::move(moved);
      }
    }
    if (held_by_live(rank)) {
      const auto& other = nodes_.at({role, rank}).info;
      return absl::AlreadyExistsError(absl::StrCat(what, " rank ", rank, " is already held by pid ", other.pid(),
                                                   " on ", other.hostname(), " (",
                                                   v1::NodeState_Name(other.state()), ")"));
    }
  } else {
    // The lowest free rank; failing that, the lowest rank of a dead node (a restart).
    for (int r = 0; r < expected && rank < 0; ++r) {
      if (nodes_.count({role, r}) == 0) rank = r;
    }
    for (int r = 0; r < expected && rank < 0; ++r) {
      if (!held_by_live(r)) rank = r;
    }
    if (rank < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("all ", expected, " ", what, " ranks are held by live nodes"));
    }
  }
  Node& node = nodes_[{role, rank}];
  node = Node();
  node.info.set_role(role);
  node.info.set_rank(rank);
  node.info.set_address(request.address());
  node.info.set_hostname(request.hostname());
  node.info.set_pid(request.pid());
  node.info.set_state(v1::NODE_STATE_REGISTERED);
  node.last_heard = Now();
  node.info.set_last_heard_unix_ms(absl::ToUnixMillis(node.last_heard));
  node.incarnation = next_incarnation_++;
  node.provisional = request.requested_rank() < 0 && !all_registered_;
  if (ticket != nullptr) *ticket = node.incarnation;
  if (!all_registered_ && CountRegistered(v1::ROLE_WORKER) == options_.num_workers &&
      CountRegistered(v1::ROLE_SERVER) == options_.num_servers) {
    all_registered_ = true;
    all_registered_at_ = Now();
  }
  changed_.SignalAll();
  return rank;
}

absl::StatusOr<int> Membership::AwaitAllRegistered(uint64_t ticket, absl::Time deadline,
                                                   const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  absl::Status failure;
  while (!all_registered_) {
    if (closed_) {
      failure = close_status_;
    } else if (cancelled && cancelled()) {
      auto it = FindTicket(ticket);
      failure = absl::CancelledError(absl::StrCat(
          it == nodes_.end() ? "a node" : NodeName(it->first), " gave up waiting for registration"));
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
    return absl::FailedPreconditionError("this registration was replaced by a newer one for the same rank");
  }
  return it->first.rank;
}

absl::Status Membership::AwaitAllRegistered(const NodeKey& self, absl::Time deadline,
                                            const std::function<bool()>& cancelled) {
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(self);
    if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat(NodeName(self), " is not registered"));
    ticket = it->second.incarnation;
  }
  return AwaitAllRegistered(ticket, deadline, cancelled).status();
}

absl::Status Membership::Heartbeat(const NodeKey& key, uint64_t* incarnation, int64_t step,
                                   double samples_per_sec) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) {
    return absl::NotFoundError(absl::StrCat(NodeName(key), " is not registered with this scheduler"));
  }
  Node& node = it->second;
  if (*incarnation == 0) *incarnation = node.incarnation;
  if (*incarnation != node.incarnation) {
    return absl::FailedPreconditionError(
        absl::StrCat(NodeName(key), " was registered again by pid ", node.info.pid(), "; this process is stale"));
  }
  if (node.info.state() == v1::NODE_STATE_DEAD) {
    return absl::FailedPreconditionError(
        absl::StrCat("the scheduler declared ", NodeName(key), " dead (", node.death_reason, ")"));
  }
  if (node.info.state() == v1::NODE_STATE_FINISHED) return absl::OkStatus();
  node.info.set_state(v1::NODE_STATE_ALIVE);
  node.info.set_last_step(step);
  node.info.set_samples_per_sec(samples_per_sec);
  node.last_heard = Now();
  node.info.set_last_heard_unix_ms(absl::ToUnixMillis(node.last_heard));
  return absl::OkStatus();
}

void Membership::MarkDead(Node& node, const std::string& why) {
  node.info.set_state(v1::NODE_STATE_DEAD);
  node.dead_at = Now();
  node.death_reason = why;
  deaths_.push_back({node.info.role(), node.info.rank()});
  changed_.SignalAll();
}

bool Membership::StreamClosed(const NodeKey& key, uint64_t incarnation, const std::string& why) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end() || it->second.incarnation != incarnation || Gone(it->second.info.state())) {
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
  it->second.info.set_state(v1::NODE_STATE_FINISHED);
  if (failed && failure_.empty()) {
    failure_ = absl::StrCat(NodeName(key), " failed: ", reason.empty() ? "no reason given" : reason);
  }
  changed_.SignalAll();
  return absl::OkStatus();
}

std::vector<v1::NodeInfo> Membership::SweepSilent() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::NodeInfo> dead;
  const absl::Time now = Now();
  for (auto& [key, node] : nodes_) {
    const v1::NodeState state = node.info.state();
    if (Gone(state)) continue;
    // A registered node is blocked in Register until everyone arrived; its silence
    // counts only from then.
    absl::Time since = node.last_heard;
    if (state == v1::NODE_STATE_REGISTERED) {
      if (!all_registered_) continue;
      since = std::max(since, all_registered_at_);
    }
    if (now - since > options_.heartbeat_timeout) {
      MarkDead(node, absl::StrCat("no heartbeat for ", Seconds(now - since)));
      dead.push_back(node.info);
    }
  }
  return dead;
}

std::vector<v1::NodeInfo> Membership::DeathsSince(size_t* cursor) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::NodeInfo> out;
  for (; *cursor < deaths_.size(); ++*cursor) {
    auto it = nodes_.find(deaths_[*cursor]);
    if (it != nodes_.end() && it->second.info.state() == v1::NODE_STATE_DEAD) out.push_back(it->second.info);
  }
  return out;
}

v1::ClusterView Membership::View() const {
  absl::MutexLock lock(&mu_);
  v1::ClusterView view;
  view.set_num_workers(options_.num_workers);
  view.set_num_servers(options_.num_servers);
  view.set_kv_store(options_.kv_store);
  // std::map orders by (role, rank): servers come out sorted.
  for (const auto& [key, node] : nodes_) {
    if (key.role == v1::ROLE_SERVER) *view.add_servers() = node.info;
  }
  return view;
}

std::vector<v1::NodeInfo> Membership::Nodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::NodeInfo> out;
  for (const auto& [key, node] : nodes_) out.push_back(node.info);
  return out;
}

std::optional<v1::NodeInfo> Membership::Find(const NodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.info;
}

bool Membership::AllRegistered() const {
  absl::MutexLock lock(&mu_);
  return all_registered_;
}

std::string Membership::FailureLocked() const {
  if (!failure_.empty() || !all_registered_) return failure_;
  // Every worker is gone and one of them died: nobody is left to finish the job.
  std::string died;
  for (int r = 0; r < options_.num_workers; ++r) {
    auto it = nodes_.find({v1::ROLE_WORKER, r});
    if (it == nodes_.end() || !Gone(it->second.info.state())) return "";
    if (died.empty() && it->second.info.state() == v1::NODE_STATE_DEAD) {
      died = absl::StrCat(NodeName(it->first), " died (", it->second.death_reason, ") and no worker is left");
    }
  }
  return died;
}

bool Membership::JobOver(std::string* reason) const {
  absl::MutexLock lock(&mu_);
  if (const std::string failure = FailureLocked(); !failure.empty()) {
    if (reason != nullptr) *reason = failure;
    return true;
  }
  if (!all_registered_) return false;
  for (int r = 0; r < options_.num_workers; ++r) {
    auto it = nodes_.find({v1::ROLE_WORKER, r});
    if (it == nodes_.end() || it->second.info.state() != v1::NODE_STATE_FINISHED) return false;
  }
  if (reason != nullptr) *reason = absl::StrCat("all ", options_.num_workers, " workers finished");
  return true;
}

std::string Membership::Failure() const {
  absl::MutexLock lock(&mu_);
  return FailureLocked();
}

bool Membership::AllGone() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, node] : nodes_) {
    if (!Gone(node.info.state())) return false;
  }
  return true;
}

std::string Membership::RegistrationTextLocked() const {
  const int workers = CountRegistered(v1::ROLE_WORKER);
  const int servers = CountRegistered(v1::ROLE_SERVER);
  std::string text = absl::StrFormat("registration: %d of %d workers, %d of %d servers after %.0f s", workers,
                                     options_.num_workers, servers, options_.num_servers,
                                     absl::ToDoubleSeconds(Now() - start_));
  std::vector<std::string> missing;
  for (v1::Role role : {v1::ROLE_WORKER, v1::ROLE_SERVER}) {
    std::vector<int> ranks;
    for (int r = 0; r < Expected(role); ++r) {
      if (nodes_.count({role, r}) == 0) ranks.push_back(r);
    }
    if (ranks.empty()) continue;
    missing.push_back(absl::StrCat(RoleName(role), ranks.size() == 1 ? " rank " : " ranks ",
                                   absl::StrJoin(ranks, ", ")));
  }
  if (!missing.empty()) absl::StrAppend(&text, "; missing ", absl::StrJoin(missing, "; "));
  return text;
}

std::string Membership::RegistrationText() const {
  absl::MutexLock lock(&mu_);
  return RegistrationTextLocked();
}

std::string Membership::Describe(const NodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(key);
  if (it == nodes_.end()) return "not registered";
  const Node& node = it->second;
  const absl::Time now = Now();
  switch (node.info.state()) {
    case v1::NODE_STATE_DEAD:
      return absl::StrCat("DEAD for ", Seconds(now - node.dead_at), " (", node.death_reason, ")");
    case v1::NODE_STATE_FINISHED:
      return "already left the job";
    case v1::NODE_STATE_REGISTERED:
      return absl::StrCat("registered ", Seconds(now - node.last_heard), " ago, no heartbeat yet");
    default:
      return absl::StrCat("last heard ", Seconds(now - node.last_heard), " ago, at step ", node.info.last_step());
  }
}

void Membership::Close(absl::Status why) {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  close_status_ = std::move(why);
  changed_.SignalAll();
}

}  // namespace dtrain::scheduler
