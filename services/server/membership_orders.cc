#include "services/server/membership_orders.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/elastic/membership_proto.h"
#include "common/log.h"

namespace dtrain::server {

void MembershipOrders::OnOrder(const v1::MembershipOrder& order) {
  absl::MutexLock one_at_a_time(&order_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (acted_ && last_.generation() == order.generation() && last_.phase() == order.phase()) return;
  }
  const v1::MembershipReport answer = CarryOut(order);
  {
    absl::MutexLock lock(&mu_);
    acted_ = true;
    last_ = answer;
  }
  // A failed order is answered with the next regular heartbeat: the scheduler asks again
  // on each answer, and a failure that persists must not turn that into a busy loop.
  if (answered_ && answer.error().empty()) answered_();
}

v1::MembershipReport MembershipOrders::CarryOut(const v1::MembershipOrder& order) {
  v1::MembershipReport answer;
  answer.set_generation(order.generation());
  answer.set_phase(order.phase());
  answer.set_highest_step(-1);
  answer.set_committed_from(-1);
  const std::string what =
      absl::StrCat(v1::MembershipOrder::Phase_Name(order.phase()), " of membership generation ", order.generation());
  absl::Status s;
  switch (order.phase()) {
    case v1::MembershipOrder::PHASE_PROPOSE: {
      absl::StatusOr<elastic::MembershipGate::Proposal> p = gate_->Propose(order.generation(), order.not_before());
      if (p.ok()) {
        answer.set_highest_step(p->highest_step);
        answer.set_committed_from(p->committed_from);
      }
      s = p.status();
      break;
    }
    case v1::MembershipOrder::PHASE_COMMIT: s = Commit(order, &answer); break;
    case v1::MembershipOrder::PHASE_ABORT: s = gate_->Abort(order.generation()); break;
    default: s = absl::InvalidArgumentError(absl::StrCat("unknown membership order phase ", order.phase()));
  }
  if (!s.ok()) {
    answer.set_error(std::string(s.message()));
    DTRAIN_LOG(ERROR) << what << " failed here: " << s.message();
  } else {
    DTRAIN_LOG(INFO) << what << " done here (highest step taken " << answer.highest_step()
                     << (answer.committed_from() >= 0
                             ? absl::StrCat(", the generation starts at step ", answer.committed_from())
                             : std::string())
                     << ")";
  }
  return answer;
}

absl::Status MembershipOrders::Commit(const v1::MembershipOrder& order, v1::MembershipReport* answer) {
  // Nothing from the wire is trusted for a count: the ranks are checked against the
  // schedule's bound before the gate sees them.
  absl::StatusOr<elastic::Generation> next =
      elastic::GenerationFromProto(order.next(), gate_->schedule().max_workers());
  if (!next.ok()) return next.status();
  absl::Status s;
  if (order.drop_pending()) {
    const absl::Status why = elastic::MembershipChangedError(order.generation(), *next);
    s = gate_->CommitDroppingStep(order.generation(), *next,
                                  [&] { return store_->DropPendingStep(next->from_step, why); });
  } else {
    s = gate_->Commit(order.generation(), *next);
  }
  if (s.ok()) answer->set_committed_from(next->from_step);
  answer->set_highest_step(gate_->highest_step());
  return s;
}

v1::MembershipReport MembershipOrders::Report() const {
  v1::MembershipReport report;
  report.set_highest_step(-1);
  report.set_committed_from(-1);
  {
    absl::MutexLock lock(&mu_);
    if (acted_) report = last_;
  }
  const elastic::MembershipSchedule schedule = gate_->schedule();
  report.set_generations_held(static_cast<int32_t>(schedule.generations().size()));
  for (const elastic::Generation& g : schedule.generations()) *report.add_generations() = elastic::GenerationToProto(g);
  std::vector<kv::KeyVersion> versions;
  int64_t lo = -1, hi = -1;
  if (store_->Versions({}, -1, &versions).ok() && !versions.empty()) {
    lo = hi = versions[0].version;
    for (const kv::KeyVersion& v : versions) {
      lo = std::min(lo, v.version);
      hi = std::max(hi, v.version);
    }
  }
  report.set_min_version(lo);
  report.set_max_version(hi);
  return report;
}

}  // namespace dtrain::server
