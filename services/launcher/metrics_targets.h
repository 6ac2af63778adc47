// The metrics endpoints of a local `dtrain launch`: the port each child is given, the
// port it reports back (through a port file, so port 0 works and parallel jobs never
// collide), and the Prometheus file_sd list of them (deploy/prometheus/prometheus.yml
// reads it):
//
//   base port -1   metrics off; every child gets DTRAIN_METRICS_PORT=-1, whatever our
//                  environment says (children would otherwise fight over one port)
//   base port 0    every child picks a free port
//   base port N    scheduler N, server i N+1+i, worker i N+1+S+i
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/role.h"

namespace dtrain::launcher {

struct MetricsTarget {
  Role role = Role::kScheduler;
  int rank = 0;
  int requested_port = 0;
  std::string port_file;
  int port = 0;              // 0 until reported
  std::string name() const;  // "scheduler", "worker 1"
};

class MetricsTargets {
 public:
  // `dir`: where the port files go (the launch's private temp dir).
  MetricsTargets(int64_t base_port, const std::string& dir, bool with_scheduler, int servers, int workers);

  bool enabled() const { return base_port_ >= 0; }
  // Environment for a child; `role` and `rank` as given to the constructor.
  std::vector<std::pair<std::string, std::string>> EnvFor(Role role, int rank) const;

  // Reads the port files that have appeared since; true once every target has a port.
  bool Collect();
  // Names of the targets without a port yet, e.g. "worker 1, server 0".
  std::string MissingText() const;
  const std::vector<MetricsTarget>& targets() const { return targets_; }

  // Prometheus file_sd JSON for the targets with a port, at `host`.
  std::string FileSd(const std::string& host) const;

 private:
  const MetricsTarget* Find(Role role, int rank) const;

  int64_t base_port_;
  std::vector<MetricsTarget> targets_;
};

}  // namespace dtrain::launcher
