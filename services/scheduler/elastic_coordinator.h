// The scheduler's side of elastic workers (docs/elastic.md): it collects joins (a
// worker registering without a rank) and leaves (a SIGTERM notice, or a worker dropped
// after the rejoin timeout), decides the next generation, and runs propose/commit
// against every parameter server so that the new generation starts at a step no server
// has merged with the old workers. With a recorded schedule (--replay-membership) it
// commits exactly the recorded generations at their recorded steps, holding joins and
// leaves until then.
//
// gRPC-free and not thread-safe: the service calls it under its own lock, and tests
// drive it with MembershipGates as the servers.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/elastic/membership_gate.h"
#include "common/elastic/membership_schedule.h"

namespace dtrain::scheduler {

// What the coordinator needs of the parameter servers: the service sends the RPCs.
class ServerGates {
 public:
  virtual ~ServerGates() = default;
  virtual int num_servers() const = 0;
  // elastic::MembershipGate::Propose and Commit on server `server`.
  virtual absl::StatusOr<elastic::MembershipGate::Proposal> Propose(int server, int generation, int64_t not_before) = 0;
  // `drop_pending`: a dead worker's removal; the server drops the pushes pending for
  // next.from_step (MembershipOrder.drop_pending).
  virtual absl::Status Commit(int server, int generation, const elastic::Generation& next, bool drop_pending) = 0;
};

class ElasticCoordinator {
 public:
  // `schedule`: the job's so far (one generation at the start, or a resumed job's).
  // `replay`: a recorded schedule to follow; its first generations must be
  // `schedule`'s (INVALID_ARGUMENT naming the first that differs), and its bounds the same.
  // Its zero-length generations (a joiner removed before its first step) are left out:
  // they merged no step, so the run without them computes the same.
  static absl::StatusOr<ElasticCoordinator> Create(elastic::MembershipSchedule schedule,
                                                   std::optional<elastic::MembershipSchedule> replay);

  // A worker that registers without a rank: the rank it gets, the lowest one neither in
  // the job nor given to another joiner (with a replay: the next rank the recording
  // lets join, in the order of its generations, held until that generation's step). It
  // steps from the commit of the generation that holds it. RESOURCE_EXHAUSTED naming the bounds when there is none.
  // `busy`: ranks still held by a live process outside the job (a leaver that has not
  // exited yet), which a joiner must not take.
  absl::StatusOr<int> Join(const std::set<int>& busy = {});
  // A worker that asks for rank `rank` (a Kubernetes Indexed Job's pod) joins with it.
  // INVALID_ARGUMENT for a rank outside [0, MAX); ALREADY_EXISTS when the rank is in the
  // latest generation or given to another joiner; with a replay, FAILED_PRECONDITION
  // when the recording has no later generation that adds it.
  absl::Status JoinAs(int rank);

  // Worker `rank` of the latest generation leaves (a SIGTERM notice, or dropped after
  // the rejoin timeout); repeating it is OK. NOT_FOUND for a rank not in the job.
  absl::Status Leave(int rank);

  // A joiner whose join is not committed yet gives it up (it failed before it heard of
  // its generation): its rank is free again. NOT_FOUND for a rank that is not such a
  // joiner; FAILED_PRECONDITION while its join is being committed (some servers may hold
  // it: it is then removed as a dead worker is, once committed).
  absl::Status WithdrawJoin(int rank);

  // Whether a join or leave waits for a commit.
  bool HasPendingChange() const { return !joined_.empty() || !left_.empty() || !taken_up_.empty(); }

  // The generations a server holds (a scheduler restarted after the servers committed
  // some it never heard of): those beyond the schedule held become the next changes, each
  // committed to every server as it is (a server that committed it already answers OK; the
  // others hold its proposal still, as the commit only follows every server's answer).
  // FAILED_PRECONDITION when `held` does not extend the schedule (another job's, or a
  // schedule that differs at a generation both hold), naming the first difference. OK and
  // nothing changes for a `held` no longer than what is known or taken up.
  absl::Status TakeUp(const std::vector<elastic::Generation>& held);
  // Whether a replayed schedule has generations not committed yet: RunChange proposes
  // the next one (holding its recorded step) before its join or leave comes.
  bool HasReplayedChangeToCome() const;
  // Whether `rank` is in the latest generation or was given to a joiner not committed yet.
  bool Holds(int rank) const;
  // Whether `rank` gave notice to leave, not committed yet.
  bool Leaving(int rank) const { return left_.count(rank) > 0; }
  // How many workers the pending joins and leaves leave (without a replay: the next
  // generation's size; with one: the latest's, less the leaves, plus the joins).
  int WorkersAfterChange() const;

  // Runs the change that is due: proposes the next generation to every server, then
  // commits it from S = (the highest step any server took) + 1 (with a replay: the
  // recorded step; at least one step after the latest generation's start) to every server, and returns the log line
  // ("worker 2 joined at step 180: 3 workers from now"). FAILED_PRECONDITION when nothing is pending, when the workers
  // left would be fewer than MIN (naming them and the bound; nothing proposed), or when a replayed step has passed
  // already (naming the server). UNAVAILABLE when a replay's next generation waits for a join or leave that has not
  // come yet. A server's error is returned as it is, the proposal standing: calling again retries (propose and commit
  // are idempotent on the servers).
  absl::StatusOr<std::string> RunChange(ServerGates& servers);

  // RunChange with the step given: a dead worker's removal (elastic_drop.h), whose new
  // generation starts exactly at the step PlanDrop chose, whatever the servers took
  // (`drop_pending`: their pending pushes of that step are dropped with the commit).
  // FAILED_PRECONDITION when `from_step` is not after the latest generation's start,
  // except with `drop_pending` at that very step for a generation after the first: every
  // key then waits at its start, so it merged no step (a joiner that died before its
  // first) and the new generation replaces it, leaving it zero-length in the schedule.
  absl::StatusOr<std::string> RunChangeFrom(ServerGates& servers, int64_t from_step, bool drop_pending);

  const elastic::MembershipSchedule& schedule() const { return schedule_; }

 private:
  ElasticCoordinator(elastic::MembershipSchedule schedule, std::optional<elastic::MembershipSchedule> replay)
      : schedule_(std::move(schedule)), replay_(std::move(replay)) {}
  // The next generation's ranks, or why there is none yet.
  absl::StatusOr<std::vector<int>> NextRanks() const;
  // The step the next generation starts at, after proposing it to every server.
  // Every server is asked even when one has not answered yet, so that servers answering
  // through heartbeats answer in the same round; the first error is returned.
  absl::StatusOr<int64_t> ProposeAll(ServerGates& servers, int generation, int64_t not_before) const;
  // Commits `next` on every server and appends it; the log line.
  absl::StatusOr<std::string> CommitAll(ServerGates& servers, int generation, elastic::Generation next,
                                        bool drop_pending);

  elastic::MembershipSchedule schedule_;
  std::optional<elastic::MembershipSchedule> replay_;
  std::set<int> joined_;                       // ranks given to joiners, not committed yet
  std::set<int> left_;                         // ranks leaving, not committed yet
  std::vector<elastic::Generation> taken_up_;  // the servers' generations after schedule_'s, to commit
  // The generation CommitAll sends, until every server committed it: a server that has
  // holds it before the schedule does, and is not ahead of the scheduler.
  std::optional<elastic::Generation> committing_;
};

// "worker 2 joined at step 180: 3 workers from now", "workers 2, 3 joined and worker 1
// left at step 400: 4 workers from now".
std::string ChangeLine(const elastic::Generation& before, const elastic::Generation& after);

// `schedule` without its zero-length generations (MembershipSchedule::ZeroLength).
absl::StatusOr<elastic::MembershipSchedule> WithoutZeroLength(const elastic::MembershipSchedule& schedule);

}  // namespace dtrain::scheduler
