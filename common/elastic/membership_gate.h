// A parameter server's side of a membership change (docs/elastic.md): which
// generation each step belongs to, and the propose/commit exchange with the scheduler
// that picks the step a new generation starts at so that no step mixes worker sets.
//
//   Propose(g, T) -> the highest step this server took a push for, h; from now on a
//                  push of a step > max(h, T - 1) is held (UNAVAILABLE: the worker retries)
//   Commit(g, {S, W}) with S > h -> steps >= S merge W's pushes; a push of a step >= S
//                  from a worker still on an older generation is refused ABORTED
//                  naming the change, and the worker redoes step S in the new one.
//
//   CommitDroppingStep(g, {S, W}) with S = h -> as Commit, for a dead worker's removal:
//                  step S's pushes taken so far are dropped from the store first.
//
// Thread-safe. AdmitPush is on every push's path: a reader lock and one atomic
// (PushIfAdmitted: two reader locks).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/elastic/membership_schedule.h"
#include "common/kv/push_gate.h"
#include "common/kv/step_ranks.h"

namespace dtrain::elastic {

class MembershipGate final : public kv::StepRanks, public kv::PushGate {
 public:
  using Clock = std::function<absl::Time()>;

  explicit MembershipGate(MembershipSchedule schedule, Clock clock = absl::Now);

  // Whether a push of `step` from a worker running generation `generation` may go to
  // the store now. An OK answer counts the step as taken (the highest step Propose
  // reports), so call it right before the store's Push; a push the store then refuses
  // only makes a later change start a step later. Errors:
  //   ABORTED "membership changed from step S: generation g, workers {0,1,3}": a
  //     generation after the worker's starts at or before `step` (fetch the schedule,
  //     redo step S);
  //   UNAVAILABLE (retry): `generation` is not committed here yet, or a proposed
  //     change holds steps above the highest taken ("... pending for 3s: step 181
  //     waits for its commit"); INVALID_ARGUMENT: a negative generation or step.
  absl::Status AdmitPush(int64_t step, int generation);

  // AdmitPush, then `push` (the store's Push) when admitted, with no CommitDroppingStep
  // between the two: a drop waits for the pushes admitted before it to reach the store,
  // so none of them lands in the store after it.
  absl::Status PushIfAdmitted(int64_t step, int generation, absl::FunctionRef<absl::Status()> push) override;

  struct Proposal {
    int64_t highest_step = -1;    // the highest step a push was taken for; -1: none
    int64_t committed_from = -1;  // >= 0: the generation is committed already, from this step
  };
  // The scheduler is about to commit generation `generation` (the latest + 1), from
  // step `not_before` at the earliest (a replayed change's recorded step; 0: as soon as
  // may be). Pushes of steps above max(highest_step, not_before - 1) are held from now.
  // Asking again returns the same answer (a restarted scheduler); for a committed
  // generation committed_from says where it starts. FAILED_PRECONDITION for any other
  // generation, naming the one expected.
  absl::StatusOr<Proposal> Propose(int generation, int64_t not_before = 0);

  // Makes `next` generation `generation`, after its Propose: next.from_step must be
  // above the highest step taken (FAILED_PRECONDITION naming it otherwise) and follow
  // the schedule's rules (INVALID_ARGUMENT). Committing the same again is OK; nothing
  // changes on error.
  absl::Status Commit(int generation, const Generation& next);

  // Commit, for a dead worker's removal (docs/elastic.md): every key is at version S =
  // next.from_step, some of step S's pushes were taken, and the dead worker's never
  // comes. So S may be the highest step taken (Commit wants it above), provided no step
  // above it was let through; once the commit is decided, `drop` runs (the store's
  // ShardStore::DropPendingStep(S, MembershipChangedError(generation, next))) while no
  // push is admitted, and the commit is made only when it returns OK (otherwise its
  // error is returned and nothing changes here). Errors as Commit's; committing the same
  // again is OK and does not run `drop`. `drop` must not call back into this gate.
  absl::Status CommitDroppingStep(int generation, const Generation& next, absl::FunctionRef<absl::Status()> drop);

  // The store went back to its snapshot of `step` (a rollback): the steps from `step` on
  // are taken again, so they count as not taken, and a proposal pending holds from there
  // (a dead worker's removal commits from the snapshot's step after the rollback).
  void RolledBack(int64_t step);

  // Gives up the proposal of `generation` (the scheduler chose none): pushes flow again.
  // OK when there is none.
  absl::Status Abort(int generation);

  MembershipSchedule schedule() const;
  int64_t highest_step() const { return highest_.load(std::memory_order_acquire); }

  std::vector<int> RanksAt(int64_t step) const override;
  int CountAt(int64_t step) const override;
  bool Holds(int64_t step, int rank) const override;
  std::string DescribeAt(int64_t step) const override;

 private:
  // AdmitPush's decision, under mu_ (reader).
  absl::Status AdmitLocked(int64_t step, int generation) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Commit's checks of `next` as generation `generation`, under mu_: OK to go on
  // (*done false), or OK because it is committed already (*done true), or why not.
  // `lowest_start`: the least from_step allowed.
  absl::Status CheckCommit(int generation, const Generation& next, int64_t lowest_start, bool* done) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock clock_;
  // Held (reader) from a push's admission until the store took it, and (writer) by a
  // CommitDroppingStep around its drop. Always taken before mu_ and before any lock of
  // the store's.
  absl::Mutex push_mu_;
  mutable absl::Mutex mu_;
  MembershipSchedule schedule_ ABSL_GUARDED_BY(mu_);
  int proposed_ ABSL_GUARDED_BY(mu_) = -1;  // the generation proposed; -1: none
  absl::Time proposed_at_ ABSL_GUARDED_BY(mu_);
  int64_t held_above_ ABSL_GUARDED_BY(mu_) = -1;        // steps above this wait for the commit
  int64_t proposed_highest_ ABSL_GUARDED_BY(mu_) = -1;  // highest_ when proposed
  // Raised by AdmitPush under the reader lock; Propose reads it under the writer lock,
  // when no admission runs.
  std::atomic<int64_t> highest_{-1};
};

// ABORTED "membership changed from step S: generation g, workers {0,1,3}": what a push
// or a parked pull of a step >= S from an older generation is answered once generation
// `generation` (`g`) is committed.
absl::Status MembershipChangedError(int generation, const Generation& g);

}  // namespace dtrain::elastic
