// An elastic job's membership on this parameter server (docs/elastic.md): adopted once
// from the scheduler's RegisterResponse, it is then what the store merges each step
// by (the gate's schedule), what every push passes first (kv::PushGate), the factor of
// each step's lr (kv::StepLr) and the worker count a Configure gets (--elastic's MAX).
//
// Made before the service starts, since its streams and Configure hold it, but empty
// until Adopt: a worker may reach this server a moment before the server hears back
// from the scheduler, so a Configure waits for it (with a deadline).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/elastic/elastic_spec.h"
#include "common/elastic/membership_gate.h"
#include "common/elastic/membership_proto.h"
#include "common/kv/epoch_lr.h"
#include "common/kv/push_gate.h"
#include "common/kv/shard_store.h"
#include "common/kv/step_lr.h"
#include "dtrain/v1/scheduler.pb.h"

namespace dtrain::server {

// Thread-safe.
class ServerMembership final : public kv::PushGate, public kv::StepLr {
 public:
  // `bounds`: this server's --elastic (enabled).
  explicit ServerMembership(const elastic::ElasticSpec& bounds);

  // Checks `state` (MembershipFromProto's rules, and the bounds of this server's
  // --elastic: INVALID_ARGUMENT naming both otherwise), builds the gate and hands it to
  // `store` (SetStepRanks, SetStepLr; the store must not be configured yet, which a
  // Configure waiting for this guarantees). FAILED_PRECONDITION when adopted already.
  absl::Status Adopt(const v1::MembershipState& state, kv::ShardStore* store);

  // For a Configure asking for `requested` workers (worker 0's -n): waits up to `wait`
  // for Adopt (UNAVAILABLE naming what is missing after that), then returns the count
  // the store is configured with, --elastic's MAX, the bound of the ranks ever merged.
  // INVALID_ARGUMENT for `requested` outside 1 .. MAX.
  absl::StatusOr<int> ConfigureWorkers(int requested, absl::Duration wait) const;

  // The gate's (UNAVAILABLE, retry, before Adopt).
  absl::Status PushIfAdmitted(int64_t step, int generation, absl::FunctionRef<absl::Status()> push) override;
  // Membership::LrFactor of the generation that merges `step` (1.0 before Adopt), times
  // `lr_factor` for each epoch of `epoch_lr` that starts at or before `step`'s epoch
  // (the epochs' lengths from the schedule as committed: elastic::DataPlan).
  double LrFactorAt(int64_t step, const kv::EpochLrSteps& epoch_lr, double lr_factor) const override;

  // Null before Adopt.
  elastic::MembershipGate* gate() const { return adopted_.HasBeenNotified() ? gate_.get() : nullptr; }
  // "2:4".
  std::string BoundsText() const;

 private:
  const elastic::ElasticSpec bounds_;
  // Set by Adopt before adopted_ is notified; read only after that.
  std::unique_ptr<elastic::MembershipGate> gate_;
  elastic::ElasticLr lr_ = elastic::ElasticLr::kScale;
  int64_t workers_at_start_ = 1;
  absl::Notification adopted_;

  // The epochs of `epoch_lr` that started by `step`'s, with the last answer kept: every
  // key of a step asks for the same one (the schedule only grows, so its size tells
  // whether the answer still holds).
  int EpochLrStepsAt(int64_t step, const kv::EpochLrSteps& epoch_lr) const;
  mutable absl::Mutex epoch_mu_;
  struct Cached {
    int64_t step = -1;
    size_t generations = 0;
    int passed = 0;
  };
  mutable Cached cached_ ABSL_GUARDED_BY(epoch_mu_);
};

}  // namespace dtrain::server
