#include "services/worker/scheduler_cluster.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace dtrain::worker {

absl::StatusOr<std::unique_ptr<SchedulerCluster>> SchedulerCluster::Join(const JoinOptions& o) {
  std::unique_ptr<SchedulerCluster> c(new SchedulerCluster(o.scheduler));
  DTRAIN_ASSIGN_OR_RETURN(v1::RegisterResponse reg,
                          c->scheduler_.Register(v1::ROLE_WORKER, o.host, o.requested_rank, o.num_workers,
                                                 o.num_servers, o.register_timeout));
  c->rank_ = reg.rank();
  c->num_workers_ = o.num_workers;
  SetLogIdentity("worker", c->rank_);
  if (reg.cluster().servers_size() != o.num_servers) {
    return absl::FailedPreconditionError(absl::StrCat("the scheduler reports ", reg.cluster().servers_size(),
                                                      " servers, this worker expects ", o.num_servers));
  }
  for (const auto& s : reg.cluster().servers()) c->servers_.push_back({s.rank(), s.address()});
  SchedulerClient::HeartbeatHooks hooks;
  SchedulerCluster* self = c.get();  // the client (and its hooks' thread) dies with *c
  hooks.on_shutdown = [self](const std::string& reason) { self->OnJobEnded(reason); };
  hooks.on_dead = [](const v1::NodeInfo& node) {
    DTRAIN_LOG(WARNING) << "scheduler reports " << (node.role() == v1::ROLE_SERVER ? "server " : "worker ")
                        << node.rank() << " dead";
  };
  c->scheduler_.StartHeartbeat(o.heartbeat_interval, std::move(hooks));
  DTRAIN_LOG(INFO) << "joined the job: " << o.num_workers << " workers, " << o.num_servers << " servers, scheduler "
                   << o.scheduler;
  return c;
}

void SchedulerCluster::OnJobEnded(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (job_status_.ok()) job_status_ = absl::AbortedError(absl::StrCat("the scheduler ended the job: ", reason));
}

absl::Status SchedulerCluster::JobStatus() const {
  absl::MutexLock lock(&mu_);
  return job_status_;
}

absl::Status SchedulerCluster::Barrier(const std::string& name, absl::Duration timeout) {
  return scheduler_.Barrier(name, v1::BARRIER_GROUP_WORKERS, timeout);
}

void SchedulerCluster::ReportProgress(int64_t step, double samples_per_sec) {
  scheduler_.SetProgress(step, samples_per_sec);
}

absl::Status SchedulerCluster::Finish(bool failed, const std::string& reason) {
  return scheduler_.Leave(failed, reason);
}

}  // namespace dtrain::worker
