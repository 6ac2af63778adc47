#include "services/server/server_membership.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
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

double ServerMembership::LrFactorAt(int64_t step) const {
  const elastic::MembershipGate* g = gate();
  if (g == nullptr) return 1.0;
  return elastic::ElasticLrFactor(lr_, g->CountAt(step), workers_at_start_);
}

}  // namespace dtrain::server
