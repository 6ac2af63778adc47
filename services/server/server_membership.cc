#include "services/server/server_membership.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/elastic/data_plan.h"
#include "common/log.h"

namespace dtrain::server {

ServerMembership::ServerMembership(const elastic::ElasticSpec& bounds) : bounds_(bounds) {}

std::string ServerMembership::BoundsText() const { return absl::StrCat(bounds_.min_workers, ":", bounds_.max_workers); }

absl::Status ServerMembership::Adopt(const v1::MembershipState& state, kv::ShardStore* store) {
  if (adopted_.HasBeenNotified()) {
    return absl::FailedPreconditionError("this server adopted its elastic job's membership already");
  }
  absl::StatusOr<elastic::Membership> m = elastic::MembershipFromProto(state);
  if (!m.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the scheduler's membership of this elastic job is refused: ", m.status().message()));
  }
  if (m->schedule.min_workers() != bounds_.min_workers || m->schedule.max_workers() != bounds_.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat("the scheduler's membership is for --elastic ",
                                                   m->schedule.min_workers(), ":", m->schedule.max_workers(),
                                                   ", this server has --elastic ", BoundsText()));
  }
  lr_ = m->lr;
  workers_at_start_ = m->workers_at_start;
  gate_ = std::make_unique<elastic::MembershipGate>(m->schedule);
  store->SetStepRanks(gate_.get());
  store->SetStepLr(this);
  const int latest = static_cast<int>(m->schedule.generations().size()) - 1;
  DTRAIN_LOG(INFO) << "elastic job (--elastic " << BoundsText() << ", --elastic-lr " << elastic::ElasticLrName(lr_)
                   << ", started with " << workers_at_start_ << " workers): " << m->schedule.Describe(latest);
  adopted_.Notify();
  return absl::OkStatus();
}

absl::StatusOr<int> ServerMembership::ConfigureWorkers(int requested, absl::Duration wait) const {
  if (requested < 1 || requested > bounds_.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat("Configure asks for ", requested,
                                                   " workers, outside this elastic job's --elastic ", BoundsText()));
  }
  if (!adopted_.WaitForNotificationWithTimeout(wait)) {
    return absl::UnavailableError(
        absl::StrCat("this server has not had its elastic job's membership from the "
                     "scheduler within ",
                     absl::FormatDuration(wait), " (it is still registering); retry"));
  }
  return bounds_.max_workers;
}

absl::Status ServerMembership::PushIfAdmitted(int64_t step, int generation, absl::FunctionRef<absl::Status()> push) {
  elastic::MembershipGate* g = gate();
  if (g == nullptr) {
    return absl::UnavailableError("this server has not had its elastic job's membership from the scheduler yet; retry");
  }
  return g->PushIfAdmitted(step, generation, push);
}

double ServerMembership::LrFactorAt(int64_t step, const kv::EpochLrSteps& epoch_lr, double lr_factor) const {
  const elastic::MembershipGate* g = gate();
  if (g == nullptr) return 1.0;
  double factor = elastic::ElasticLrFactor(lr_, g->CountAt(step), workers_at_start_);
  if (!epoch_lr.enabled()) return factor;
  const int passed = EpochLrStepsAt(step, epoch_lr);
  for (int i = 0; i < passed; ++i) factor *= lr_factor;
  return factor;
}

int ServerMembership::EpochLrStepsAt(int64_t step, const kv::EpochLrSteps& epoch_lr) const {
  const elastic::MembershipSchedule schedule = gate()->schedule();
  absl::MutexLock lock(&epoch_mu_);
  if (cached_.step == step && cached_.generations == schedule.generations().size()) return cached_.passed;
  const elastic::DataPlan plan(0, epoch_lr.num_examples, epoch_lr.batch_size, schedule);
  absl::StatusOr<elastic::StepPlace> place = plan.Place(step);
  if (!place.ok()) return 0;  // an epoch with no step: the workers fail on it first
  int passed = 0;
  for (int64_t e : epoch_lr.epochs) passed += place->epoch >= e ? 1 : 0;
  cached_ = Cached{step, schedule.generations().size(), passed};
  return passed;
}

}  // namespace dtrain::server
