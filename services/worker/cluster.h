// The worker's membership in a job: its rank among the workers, the parameter servers
// to talk to, barriers, progress reports and leaving. Separate from KVStore, which only
// synchronises parameters: rejoin (a restarted rank) and fencing change this side,
// not the kvstores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dtrain::worker {

struct ServerEndpoint {
  int rank = 0;
  std::string address;  // host:port
};

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

 private:
  std::vector<ServerEndpoint> servers_;
};

}  // namespace dtrain::worker
