// The worker's membership in a job: its rank among the workers, the parameter servers
// to talk to, barriers, progress reports and leaving. Separate from KVStore, which only
// synchronises parameters: rejoin (a restarted rank) and fencing change this side,
// not the kvstores.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dtrain::worker {

struct ServerEndpoint {
  int rank = 0;
  std::string address;  // host:port
  // The scheduler holds it DEAD: its process is gone, and a replacement may come back
  // at another address (with replicas its ranges go on at their other members).
  bool dead = false;
};

// One worker's figures of one epoch, for the job-wide progress line and
// the validation combined over every worker's part of the test set.
struct EpochFigures {
  int64_t epoch = 0;
  int64_t samples = 0;       // trained by this worker in the epoch
  double train_seconds = 0;  // its training time
  int64_t eval_correct = 0;  // its part of the test set classified right
  int64_t eval_count = 0;    // the part's size
  double eval_loss_sum = 0;  // the part's summed cross-entropy
};

class ClusterRecovery;  // cluster_recovery.h
class ClusterElastic;   // cluster_elastic.h

class Cluster {
 public:
  virtual ~Cluster() = default;

  virtual int rank() const = 0;
  virtual int num_workers() const = 0;
  // The parameter servers, in rank order (empty when the job has none).
  virtual const std::vector<ServerEndpoint>& servers() const = 0;

  // Blocks until every worker reached the barrier `name`; the error names who did
  // not arrive within `timeout`.
  virtual absl::Status Barrier(const std::string& name, absl::Duration timeout) = 0;
  // This worker's step and speed, for `dtrain status` and the scheduler's metrics.
  virtual void ReportProgress(int64_t step, double samples_per_sec) = 0;
  // OK while the job runs; ABORTED with the reason once the scheduler ended it (a
  // failed node, the job over), so that a waiting step stops at once.
  virtual absl::Status JobStatus() const = 0;
  // Tells the job this worker is done (or failed, with the reason).
  virtual absl::Status Finish(bool failed, const std::string& reason) = 0;

  // This worker's figures of an epoch, for the other workers. Replaces the
  // previous report; a rank's reports outlive its process (a replacement continues).
  virtual void ReportEpoch(const EpochFigures& /*figures*/) {}
  // Every worker's figures of `epoch`, by rank, once all have reported it: blocks up to
  // `timeout` (DEADLINE_EXCEEDED naming the workers whose report is missing), or until
  // the job ends (its JobStatus). UNIMPLEMENTED where the cluster has no channel for it
  // (the trainer then reports its own part).
  virtual absl::StatusOr<std::vector<EpochFigures>> GatherEpoch(int64_t /*epoch*/, absl::Duration /*timeout*/) {
    return absl::UnimplementedError("this cluster cannot gather the workers' epoch figures");
  }

  // Rejoin, dead peers, fencing identity and rollback orders (cluster_recovery.h);
  // null where the cluster has none of them (no scheduler).
  virtual ClusterRecovery* recovery() { return nullptr; }
  // The membership of an elastic job (cluster_elastic.h); null where the job's workers
  // are fixed.
  virtual ClusterElastic* elastic() { return nullptr; }
};

// A job of one worker and no servers (kvstore local, device).
class LocalCluster final : public Cluster {
 public:
  int rank() const override { return 0; }
  int num_workers() const override { return 1; }
  const std::vector<ServerEndpoint>& servers() const override { return servers_; }
  absl::Status Barrier(const std::string&, absl::Duration) override { return absl::OkStatus(); }
  void ReportProgress(int64_t, double) override {}
  absl::Status JobStatus() const override { return absl::OkStatus(); }
  absl::Status Finish(bool, const std::string&) override { return absl::OkStatus(); }
  void ReportEpoch(const EpochFigures& figures) override { last_epoch_ = figures; }
  absl::StatusOr<std::vector<EpochFigures>> GatherEpoch(int64_t epoch, absl::Duration) override {
    if (!last_epoch_ || last_epoch_->epoch != epoch) {
      return absl::FailedPreconditionError("GatherEpoch before ReportEpoch of that epoch");
    }
    return std::vector<EpochFigures>{*last_epoch_};
  }

 private:
  std::vector<ServerEndpoint> servers_;
  std::optional<EpochFigures> last_epoch_;
};

}  // namespace dtrain::worker
