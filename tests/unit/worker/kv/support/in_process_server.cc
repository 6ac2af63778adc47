#include "tests/unit/worker/kv/support/in_process_server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/server/control_handler.h"
#include "services/server/ps_service.h"
#include "services/server/snapshot_rollback.h"
#include "services/server/snapshot_writer.h"

namespace dtrain::worker::testing {

InProcessServer::InProcessServer(int rank, Clock clock, absl::Duration sync_timeout)
    : rank_(rank),
      address_(absl::StrCat("inprocess:", rank)),
      clock_(std::move(clock)),
      sync_timeout_(sync_timeout),
      store_(clock_),
      control_(std::make_unique<dtrain::server::ControlHandler>(
          &store_, dtrain::server::ControlOptions{dtrain::server::PsServiceOptions().allow_non_finite, nullptr})) {}

InProcessServer::~InProcessServer() = default;

kv::StreamOptions InProcessServer::stream_options() const {
  // As PsService::PushPull sets them from dtrain-server's defaults (no TLS, no metrics).
  const dtrain::server::PsServiceOptions flags;
  kv::StreamOptions stream;
  stream.sync_timeout = sync_timeout_;
  stream.request_limits = flags.request_limits;
  stream.allow_non_finite = flags.allow_non_finite;
  stream.max_pending_requests = flags.max_pending_requests;
  stream.max_queued_bytes = flags.max_queued_bytes;
  stream.catch_up = gate_;
  return stream;
}

void InProcessServer::EnableSnapshots(const std::string& dir, int64_t every) {
  snapshots_ = std::make_unique<dtrain::server::SnapshotWriter>(dtrain::server::SnapshotOptions{dir, every, 2}, &store_,
                                                                nullptr);
  rollback_ = std::make_unique<dtrain::server::SnapshotRollback>(dir, &store_, snapshots_.get(),
                                                                 [this](const v1::SnapshotReport& report) {
                                                                   absl::MutexLock lock(&mu_);
                                                                   report_ = report;
                                                                 });
  snapshots_->SetRank(rank_);
  rollback_->Start(rank_);
}

std::vector<int64_t> InProcessServer::CompleteSnapshots(absl::Duration timeout) {
  if (snapshots_ == nullptr) return {};
  snapshots_->WaitIdle(absl::Now() + timeout);
  return snapshots_->complete_steps();
}

absl::Status InProcessServer::Rollback(const v1::RollbackOrder& order) {
  if (rollback_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("server ", rank_, " writes no snapshots (EnableSnapshots)"));
  }
  rollback_->OnOrder(order);
  absl::MutexLock lock(&mu_);
  if (report_.rollback_done() != order.generation()) {
    return absl::InternalError(absl::StrCat("server ", rank_, " did not carry out rollback ", order.generation(),
                                            " to step ", order.step(), " (see the log)"));
  }
  return absl::OkStatus();
}

void InProcessServer::Kill() {
  absl::MutexLock lock(&mu_);
  killed_ = true;
  for (Link* link : links_) {
    link->Break(absl::UnavailableError(
        absl::StrCat("server ", rank_, " at ", address_, ": PushPull stream broke: the server was killed")));
  }
}

bool InProcessServer::killed() const {
  absl::MutexLock lock(&mu_);
  return killed_;
}

void InProcessServer::Register(Link* link) {
  absl::MutexLock lock(&mu_);
  links_.push_back(link);
}

void InProcessServer::Unregister(Link* link) {
  absl::MutexLock lock(&mu_);
  links_.erase(std::remove(links_.begin(), links_.end(), link), links_.end());
}

InProcessServers::InProcessServers(int n, Clock clock, absl::Duration sync_timeout) {
  for (int r = 0; r < n; ++r) servers_.push_back(std::make_unique<InProcessServer>(r, clock, sync_timeout));
}

std::vector<ServerEndpoint> InProcessServers::endpoints() const {
  std::vector<ServerEndpoint> out;
  for (const auto& s : servers_) out.push_back({s->rank(), s->address()});
  return out;
}

ChannelFactory InProcessServers::factory() {
  return [this](int server_rank, const std::string& address, int worker_rank,
                absl::Duration timeout) -> absl::StatusOr<std::unique_ptr<ServerChannel>> {
    for (const auto& s : servers_) {
      if (s->address() == address && s->rank() == server_rank) return s->Connect(worker_rank, timeout);
    }
    return absl::UnavailableError(absl::StrCat("cannot reach parameter server ", server_rank, " at ", address));
  };
}

// One worker's Cluster of a FakeJob. The job has no scheduler: a first process has no
// recovery part (as LocalCluster); a replacement's says it rejoined, and nothing more
// (no fencing identity, no dead peers, no rollback orders).
class FakeJob::Member final : public Cluster, public ClusterRecovery {
 public:
  Member(FakeJob* job, int rank, bool rejoined) : job_(job), rank_(rank), rejoined_(rejoined) {}
  int rank() const override { return rank_; }
  ClusterRecovery* recovery() override { return rejoined_ ? this : nullptr; }
  int num_workers() const override { return job_->num_workers_; }
  const std::vector<ServerEndpoint>& servers() const override { return job_->servers_; }
  absl::Status Barrier(const std::string& name, absl::Duration timeout) override {
    return job_->Barrier(name, timeout);
  }
  void ReportProgress(int64_t, double) override {}
  absl::Status JobStatus() const override { return job_->Status(); }
  absl::Status Finish(bool, const std::string&) override { return absl::OkStatus(); }

  bool rejoined() const override { return rejoined_; }
  void SetResuming(bool) override {}
  std::vector<DeadPeer> DeadPeers() const override { return {}; }
  absl::StatusOr<bool> ExtendWaitForRejoin() override { return false; }
  uint64_t incarnation() const override { return 0; }
  std::string job_id() const override { return ""; }
  std::optional<RollbackOrder> PendingRollback() const override { return std::nullopt; }
  void RollbackDone(uint64_t) override {}
  void AwaitingRollback(bool) override {}
  bool RollbackEnabled() const override { return false; }

 private:
  FakeJob* job_;
  int rank_;
  bool rejoined_;
};

FakeJob::FakeJob(int num_workers, std::vector<ServerEndpoint> servers)
    : num_workers_(num_workers), servers_(std::move(servers)) {}

FakeJob::~FakeJob() = default;

Cluster& FakeJob::worker(int rank) {
  absl::MutexLock lock(&mu_);
  if (members_.empty()) {
    for (int r = 0; r < num_workers_; ++r) members_.push_back(std::make_unique<Member>(this, r, false));
  }
  return *members_[static_cast<size_t>(rank)];
}

Cluster& FakeJob::replacement(int rank) {
  worker(rank);  // the first processes come first
  absl::MutexLock lock(&mu_);
  members_.push_back(std::make_unique<Member>(this, rank, true));
  return *members_.back();
}

void FakeJob::End(const std::string& why) {
  absl::MutexLock lock(&mu_);
  ended_ = why;
}

absl::Status FakeJob::Status() const {
  absl::MutexLock lock(&mu_);
  return ended_.empty() ? absl::OkStatus() : absl::AbortedError(ended_);
}

absl::Status FakeJob::Barrier(const std::string& name, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const int64_t round = rounds_;
  if (++arrived_ == num_workers_) {
    arrived_ = 0;
    ++rounds_;
    return absl::OkStatus();
  }
  // Real time: the workers are threads of this test, which all arrive at once.
  auto passed = [this, round]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return rounds_ > round; };
  if (mu_.AwaitWithTimeout(absl::Condition(&passed), timeout)) return absl::OkStatus();
  --arrived_;
  return absl::DeadlineExceededError(
      absl::StrCat("barrier ", name, ": ", num_workers_ - arrived_ - 1, " workers did not arrive"));
}

}  // namespace dtrain::worker::testing
