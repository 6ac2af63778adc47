#include "services/scheduler/membership_proto.h"

#include "absl/strings/str_cat.h"

namespace dtrain::scheduler {

absl::StatusOr<NodeKey> KeyOf(v1::Role role, int rank, const char* what) {
  absl::StatusOr<Role> r = RoleFromProto(role);
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", r.status().message()));
  return NodeKey{*r, rank};
}

namespace {

v1::NodeState StateToProto(NodeState state) {
  switch (state) {
    case NodeState::kRegistered: return v1::NODE_STATE_REGISTERED;
    case NodeState::kAlive: return v1::NODE_STATE_ALIVE;
    case NodeState::kDead: return v1::NODE_STATE_DEAD;
    case NodeState::kFinished: return v1::NODE_STATE_FINISHED;
    case NodeState::kRejoining: return v1::NODE_STATE_REJOINING;
    default: return v1::NODE_STATE_UNSPECIFIED;
  }
}

}  // namespace

absl::StatusOr<Registration> RegistrationFromProto(const v1::RegisterRequest& request) {
  absl::StatusOr<Role> role = RoleFromProto(request.role());
  if (!role.ok()) return absl::InvalidArgumentError(absl::StrCat("RegisterRequest: ", role.status().message()));
  Registration r;
  r.role = *role;
  r.address = request.address();
  r.requested_rank = request.requested_rank();
  r.hostname = request.hostname();
  r.pid = request.pid();
  r.num_workers = request.num_workers();
  r.num_servers = request.num_servers();
  r.job_id = request.job_id();
  r.incarnation = request.incarnation();
  r.replication = request.replication();
  r.worker_incarnations.assign(request.worker_incarnations().begin(), request.worker_incarnations().end());
  return r;
}

EpochFigures EpochFromProto(const v1::EpochReport& report) {
  EpochFigures e;
  e.epoch = report.epoch();
  e.samples = report.samples();
  e.train_seconds = report.train_seconds();
  e.eval_correct = report.eval_correct();
  e.eval_count = report.eval_count();
  e.eval_loss_sum = report.eval_loss_sum();
  return e;
}

v1::NodeInfo NodeToProto(const NodeRecord& node) {
  v1::NodeInfo info;
  info.set_role(ToProto(node.role));
  info.set_rank(node.rank);
  info.set_address(node.address);
  info.set_state(StateToProto(node.state));
  info.set_last_step(node.last_step);
  info.set_last_heard_unix_ms(node.last_heard_unix_ms);
  info.set_hostname(node.hostname);
  info.set_pid(node.pid);
  info.set_samples_per_sec(node.samples_per_sec);
  info.set_incarnation(node.incarnation);
  info.set_restarts(node.restarts);
  info.set_dead_since_unix_ms(node.dead_since_unix_ms);
  info.set_death_reason(node.death_reason);
  for (const EpochFigures& e : node.recent_epochs) {
    v1::EpochReport* report = info.add_recent_epochs();
    report->set_epoch(e.epoch);
    report->set_samples(e.samples);
    report->set_train_seconds(e.train_seconds);
    report->set_eval_correct(e.eval_correct);
    report->set_eval_count(e.eval_count);
    report->set_eval_loss_sum(e.eval_loss_sum);
  }
  return info;
}

std::vector<v1::NodeInfo> NodesToProto(const std::vector<NodeRecord>& nodes) {
  std::vector<v1::NodeInfo> out;
  out.reserve(nodes.size());
  for (const NodeRecord& n : nodes) out.push_back(NodeToProto(n));
  return out;
}

v1::ClusterView ViewToProto(const ClusterShape& view) {
  v1::ClusterView out;
  out.set_num_workers(view.num_workers);
  out.set_num_servers(view.num_servers);
  out.set_kv_store(KVStoreModeName(view.kv_store));  // the wire spells the mode by name
  out.set_job_id(view.job_id);
  out.set_replication(view.replication);
  for (const NodeRecord& s : view.servers) *out.add_servers() = NodeToProto(s);
  return out;
}

}  // namespace dtrain::scheduler
