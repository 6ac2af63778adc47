#include "services/scheduler/heartbeat_gates.h"

#include "absl/strings/str_cat.h"
#include "common/elastic/membership_proto.h"
#include "google/protobuf/util/message_differencer.h"

namespace dtrain::scheduler {

using v1::MembershipOrder;
using v1::MembershipReport;

HeartbeatGates::HeartbeatGates(int num_servers) : num_servers_(num_servers), servers_(num_servers) {}

bool HeartbeatGates::Answers(const std::optional<MembershipReport>& report, const MembershipOrder& order) {
  return report.has_value() && report->generation() == order.generation() && report->phase() == order.phase();
}

absl::StatusOr<MembershipReport> HeartbeatGates::Ask(int server, const MembershipOrder& order, const char* what) {
  if (server < 0 || server >= num_servers_) {
    return absl::InvalidArgumentError(absl::StrCat("no server ", server, " (", num_servers_, " servers)"));
  }
  absl::MutexLock lock(&mu_);
  Server& s = servers_[server];
  // A proposal answered by a commit of the same generation needs no new order.
  if (order.phase() == MembershipOrder::PHASE_PROPOSE && s.report && s.report->generation() == order.generation() &&
      s.report->phase() == MembershipOrder::PHASE_COMMIT && s.report->error().empty()) {
    return *s.report;
  }
  if (!Answers(s.report, order)) {
    // Repeated until answered; an order already answered is not sent again (the order
    // that follows it may be under way).
    if (!s.order || !google::protobuf::util::MessageDifferencer::Equals(*s.order, order)) s.order = order;
    return absl::UnavailableError(
        absl::StrCat("waiting for server ", server, "'s answer to ", what, " of generation ", order.generation()));
  }
  if (!s.report->error().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("server ", server, " refused ", what, " of generation ",
                                                      order.generation(), ": ", s.report->error()));
  }
  return *s.report;
}

absl::StatusOr<elastic::MembershipGate::Proposal> HeartbeatGates::Propose(int server, int generation,
                                                                          int64_t not_before) {
  MembershipOrder order;
  order.set_phase(MembershipOrder::PHASE_PROPOSE);
  order.set_generation(generation);
  order.set_not_before(not_before);
  absl::StatusOr<MembershipReport> answer = Ask(server, order, "the proposal");
  if (!answer.ok()) return answer.status();
  elastic::MembershipGate::Proposal p;
  p.highest_step = answer->highest_step();
  // A generation after the first never starts at step 0, so 0 (the field's default)
  // means "not committed".
  p.committed_from = answer->committed_from() > 0 ? answer->committed_from() : -1;
  return p;
}

absl::Status HeartbeatGates::Commit(int server, int generation, const elastic::Generation& next, bool drop_pending) {
  MembershipOrder order;
  order.set_phase(MembershipOrder::PHASE_COMMIT);
  order.set_generation(generation);
  *order.mutable_next() = elastic::GenerationToProto(next);
  order.set_drop_pending(drop_pending);
  absl::StatusOr<MembershipReport> answer = Ask(server, order, "the commit");
  if (!answer.ok()) return answer.status();
  if (answer->committed_from() != next.from_step) {
    return absl::FailedPreconditionError(absl::StrCat("server ", server, " committed generation ", generation,
                                                      " from step ", answer->committed_from(), ", not from step ",
                                                      next.from_step));
  }
  return absl::OkStatus();
}

absl::Status HeartbeatGates::Abort(int server, int generation) {
  MembershipOrder order;
  order.set_phase(MembershipOrder::PHASE_ABORT);
  order.set_generation(generation);
  return Ask(server, order, "the abort").status();
}

void HeartbeatGates::Heard(int server, uint64_t incarnation) {
  if (server < 0 || server >= num_servers_) return;
  absl::MutexLock lock(&mu_);
  Server& s = servers_[server];
  if (incarnation > s.incarnation) {
    s.report.reset();
    s.incarnation = incarnation;
  }
}

void HeartbeatGates::Report(int server, uint64_t incarnation, const MembershipReport& report) {
  Heard(server, incarnation);
  if (server < 0 || server >= num_servers_) return;
  absl::MutexLock lock(&mu_);
  Server& s = servers_[server];
  if (incarnation < s.incarnation) return;  // a fenced process's
  s.report = report;
}

std::optional<MembershipOrder> HeartbeatGates::OrderFor(int server) const {
  if (server < 0 || server >= num_servers_) return std::nullopt;
  absl::MutexLock lock(&mu_);
  const Server& s = servers_[server];
  if (!s.order || Answers(s.report, *s.order)) return std::nullopt;
  return s.order;
}

std::optional<MembershipReport> HeartbeatGates::LastReport(int server) const {
  if (server < 0 || server >= num_servers_) return std::nullopt;
  absl::MutexLock lock(&mu_);
  return servers_[server].report;
}

}  // namespace dtrain::scheduler
