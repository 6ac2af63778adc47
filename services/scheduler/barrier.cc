#include "services/scheduler/barrier.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace dtrain::scheduler {
namespace {

// Waits are sliced so a cancelled RPC is noticed promptly.
constexpr absl::Duration kPollSlice = absl::Milliseconds(200);

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

bool BarrierSet::IsMember(v1::BarrierGroup group, const NodeKey& key) const {
  const bool worker = key.role == v1::ROLE_WORKER && key.rank >= 0 && key.rank < num_workers_;
  const bool server = key.role == v1::ROLE_SERVER && key.rank >= 0 && key.rank < num_servers_;
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
  for (v1::Role role : {v1::ROLE_WORKER, v1::ROLE_SERVER}) {
    for (int r = 0; r < (role == v1::ROLE_WORKER ? num_workers_ : num_servers_); ++r) {
      const NodeKey key{role, r};
      if (!IsMember(group, key) || round.arrived.count(key) > 0) continue;
      std::string text = absl::StrCat(RoleName(role), " rank ", r);
      if (describe_) absl::StrAppend(&text, " (", describe_(key), ")");
      missing.push_back(std::move(text));
    }
  }
  return absl::StrJoin(missing, ", ");
}

absl::Status BarrierSet::Wait(const std::string& name, v1::BarrierGroup group, const NodeKey& self,
                              absl::Time deadline, const std::function<bool()>& cancelled) {
  if (!IsMember(group, self)) {
    return absl::InvalidArgumentError(absl::StrCat(NodeName(self), " is not a member of barrier group ",
                                                   GroupName(group), " (barrier '", name, "')"));
  }
  if (name.size() > limits_.max_name_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("barrier name of ", name.size(), " bytes from ", NodeName(self),
                                                   " is longer than the limit of ", limits_.max_name_bytes,
                                                   " bytes"));
  }
  const absl::Time start = absl::Now();
  const Id id{name, static_cast<int>(group)};
  absl::MutexLock lock(&mu_);
  auto found = rounds_.find(id);
  if (found == rounds_.end()) {
    if (rounds_.size() >= limits_.max_open) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot open ", Label(id), " for ", NodeName(self), ": ", rounds_.size(),
                       " barriers are open, the limit is ", limits_.max_open));
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
  ++round.arrived[self];
  if (static_cast<int>(round.arrived.size()) == GroupSize(group)) {
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
                          GroupSize(group), absl::ToDoubleSeconds(absl::Now() - start),
                          MissingText(id, round)));
    }
    if (!failure.ok()) {
      // Withdraw, so the others keep waiting for us and a retry counts once.
      auto it = round.arrived.find(self);
      if (--it->second == 0) round.arrived.erase(it);
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
