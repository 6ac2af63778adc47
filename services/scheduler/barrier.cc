#include "services/scheduler/barrier.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace dtrain::scheduler {
namespace {

// Waits are sliced so a cancelled RPC is noticed promptly.
constexpr absl::Duration kPollSlice = absl::Milliseconds(200);
// Changes of incarnation remembered per rank and barrier, for "passed by incarnation N".
constexpr size_t kPassersKept = 8;

}  // namespace

std::string GroupName(v1::BarrierGroup group) {
  switch (group) {
    case v1::BARRIER_GROUP_WORKERS: return "workers";
    case v1::BARRIER_GROUP_SERVERS: return "servers";
    case v1::BARRIER_GROUP_ALL: return "all";
    default: return "unknown-group";
  }
}

BarrierSet::BarrierSet(int num_workers, int num_servers, Describe describe, BarrierLimits limits)
    : num_workers_(num_workers), num_servers_(num_servers), describe_(std::move(describe)), limits_(limits) {}

size_t BarrierSet::open_count() const {
  absl::MutexLock lock(&mu_);
  return rounds_.size();
}

size_t BarrierSet::history_count() const {
  absl::MutexLock lock(&mu_);
  return history_.size();
}

uint64_t BarrierSet::rounds_passed(const std::string& name, v1::BarrierGroup group, const NodeKey& member) const {
  absl::MutexLock lock(&mu_);
  auto h = history_.find({name, static_cast<int>(group)});
  if (h == history_.end()) return 0;
  auto m = h->second.members.find(member);
  return m == h->second.members.end() ? 0 : m->second.rounds;
}

BarrierSet::History& BarrierSet::HistoryOf(const Id& id) {
  auto found = history_.find(id);
  if (found != history_.end()) return found->second;
  if (history_.size() >= limits_.max_history && !history_.empty()) {
    // Forget the least recently used barrier, preferring one nobody waits at.
    auto victim = history_.end();
    for (auto it = history_.begin(); it != history_.end(); ++it) {
      const bool open = rounds_.count(it->first) > 0;
      const bool victim_open = victim != history_.end() && rounds_.count(victim->first) > 0;
      if (victim == history_.end() || (victim_open && !open) ||
          (open == victim_open && it->second.last_used < victim->second.last_used)) {
        victim = it;
      }
    }
    history_.erase(victim);
  }
  return history_[id];
}

void BarrierSet::RecordPassed(const Id& id, const std::map<NodeKey, std::map<uint64_t, int>>& arrived) {
  if (limits_.max_history == 0) return;
  History& history = HistoryOf(id);
  history.last_used = ++uses_;
  for (const auto& [key, by_incarnation] : arrived) {
    Passed& passed = history.members[key];
    // A replacement waiting next to its paused predecessor: the newer one passed.
    const uint64_t newest = by_incarnation.empty() ? 0 : by_incarnation.rbegin()->first;
    if (passed.passers.empty() || passed.passers.back().second != newest) {
      passed.passers.emplace_back(passed.rounds, newest);
      if (passed.passers.size() > kPassersKept) passed.passers.erase(passed.passers.begin());
    }
    ++passed.rounds;
    if (newest > passed.incarnation) {
      passed.incarnation = newest;
      passed.calls = 1;
    } else if (newest > 0 && newest == passed.incarnation) {
      ++passed.calls;
    }
  }
}

bool BarrierSet::IsMember(v1::BarrierGroup group, const NodeKey& key) const {
  const bool worker = key.role == Role::kWorker && key.rank >= 0 && key.rank < num_workers_;
  const bool server = key.role == Role::kServer && key.rank >= 0 && key.rank < num_servers_;
  switch (group) {
    case v1::BARRIER_GROUP_WORKERS: return worker;
    case v1::BARRIER_GROUP_SERVERS: return server;
    case v1::BARRIER_GROUP_ALL: return worker || server;
    default: return false;
  }
}

int BarrierSet::GroupSize(v1::BarrierGroup group) const {
  switch (group) {
    case v1::BARRIER_GROUP_WORKERS: return num_workers_;
    case v1::BARRIER_GROUP_SERVERS: return num_servers_;
    case v1::BARRIER_GROUP_ALL: return num_workers_ + num_servers_;
    default: return 0;
  }
}

std::string BarrierSet::Label(const Id& id) const {
  return absl::StrCat("barrier '", id.first, "' (", GroupName(static_cast<v1::BarrierGroup>(id.second)), ")");
}

std::string BarrierSet::MissingText(const Id& id, const Round& round) const {
  const auto group = static_cast<v1::BarrierGroup>(id.second);
  std::vector<std::string> missing;
  for (Role role : {Role::kWorker, Role::kServer}) {
    for (int r = 0; r < (role == Role::kWorker ? num_workers_ : num_servers_); ++r) {
      const NodeKey key{role, r};
      if (!IsMember(group, key) || round.arrived.count(key) > 0) continue;
      std::string text = absl::StrCat(RoleName(role), " rank ", r);
      if (describe_) absl::StrAppend(&text, " (", describe_(key), ")");
      missing.push_back(std::move(text));
    }
  }
  return absl::StrJoin(missing, ", ");
}

bool BarrierSet::PassedBefore(const Id& id, const NodeKey& self, uint64_t incarnation) {
  auto history = history_.find(id);
  if (history == history_.end()) return false;
  auto member = history->second.members.find(self);
  if (member == history->second.members.end()) return false;
  Passed& passed = member->second;
  if (incarnation > passed.incarnation) {  // a new process of the rank: its first call
    passed.incarnation = incarnation;
    passed.calls = 0;
  }
  if (incarnation != passed.incarnation || passed.calls >= passed.rounds) return false;
  const uint64_t round = passed.calls++;
  history->second.last_used = ++uses_;
  std::string by = "an earlier incarnation";  // its entry was dropped (kPassersKept)
  for (const auto& [first, passer] : passed.passers) {
    if (first > round) break;
    by = passer > 0 ? absl::StrCat("incarnation ", passer) : "an earlier process";
  }
  DTRAIN_LOG(INFO) << "barrier '" << id.first << "': " << NodeName(self) << " incarnation " << incarnation
                   << " passes round " << round << ", passed by " << by;
  return true;
}

absl::Status BarrierSet::Wait(const std::string& name, v1::BarrierGroup group, const NodeKey& self,
                              uint64_t incarnation, absl::Time deadline, const std::function<bool()>& cancelled) {
  if (!IsMember(group, self)) {
    return absl::InvalidArgumentError(absl::StrCat(NodeName(self), " is not a member of barrier group ",
                                                   GroupName(group), " (barrier '", name, "')"));
  }
  if (name.size() > limits_.max_name_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("barrier name of ", name.size(), " bytes from ", NodeName(self),
                                                   " is longer than the limit of ", limits_.max_name_bytes, " bytes"));
  }
  const absl::Time start = absl::Now();
  const Id id{name, static_cast<int>(group)};
  absl::MutexLock lock(&mu_);
  if (incarnation > 0 && PassedBefore(id, self, incarnation)) return absl::OkStatus();
  auto found = rounds_.find(id);
  if (found == rounds_.end()) {
    if (rounds_.size() >= limits_.max_open) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot open ", Label(id), " for ", NodeName(self), ": ",
                                                       rounds_.size(), " barriers are open, the limit is ",
                                                       limits_.max_open));
    }
    found = rounds_.emplace(id, Round()).first;
  }
  Round& round = found->second;  // std::map: the reference stays valid while we sleep
  ++round.inside;
  // Every return below goes through here: the last one out forgets the barrier, so
  // names used once (per epoch, per checkpoint) do not pile up.
  auto leave = [&](absl::Status s) {
    if (--round.inside == 0 && round.arrived.empty()) rounds_.erase(id);
    return s;
  };
  const uint64_t my_generation = round.generation;
  ++round.arrived[self][incarnation];
  if (static_cast<int>(round.arrived.size()) == GroupSize(group)) {
    RecordPassed(id, round.arrived);
    ++round.generation;
    round.arrived.clear();
    changed_.SignalAll();
    return leave(absl::OkStatus());
  }
  absl::Status failure;
  while (round.generation == my_generation) {
    if (closed_) {
      failure = absl::UnavailableError("the scheduler is shutting down");
    } else if (cancelled && cancelled()) {
      failure = absl::CancelledError(absl::StrCat(NodeName(self), " gave up waiting at ", Label(id)));
    } else if (absl::Now() >= deadline) {
      failure = absl::DeadlineExceededError(
          absl::StrFormat("%s: %d of %d arrived after %.1f s; missing %s", Label(id), round.arrived.size(),
                          GroupSize(group), absl::ToDoubleSeconds(absl::Now() - start), MissingText(id, round)));
    }
    if (!failure.ok()) {
      // Withdraw, so the others keep waiting for us and a retry counts once. A
      // process that died waiting (its RPC cancelled) is withdrawn the same way, so
      // its replacement joins this round and the rank still counts once.
      auto it = round.arrived.find(self);
      auto mine = it->second.find(incarnation);
      if (--mine->second == 0) it->second.erase(mine);
      if (it->second.empty()) round.arrived.erase(it);
      return leave(failure);
    }
    changed_.WaitWithDeadline(&mu_, std::min(deadline, absl::Now() + kPollSlice));
  }
  auto aborted = round.aborted.find(my_generation);
  return leave(aborted == round.aborted.end() ? absl::OkStatus() : aborted->second);
}

void BarrierSet::NodeDied(const NodeKey& key, const std::string& why) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, round] : rounds_) {
    const auto group = static_cast<v1::BarrierGroup>(id.second);
    if (round.arrived.empty() || !IsMember(group, key) || round.arrived.count(key) > 0) continue;
    round.aborted[round.generation] = absl::AbortedError(
        absl::StrCat(Label(id), " cannot complete: ", NodeName(key), " died before arriving (", why, ")"));
    ++round.generation;
    round.arrived.clear();
  }
  changed_.SignalAll();
}

void BarrierSet::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  changed_.SignalAll();
}

}  // namespace dtrain::scheduler
