// One process's metrics: the families its role registers, rendered as Prometheus text
// exposition, optionally served over HTTP at /metrics (prometheus-cpp's Exposer).
//
//   DTRAIN_ASSIGN_OR_RETURN(auto registry, StartMetrics(flags.metrics, "worker"));
//   if (registry) { worker_metrics = std::make_unique<WorkerMetrics>(*registry); }
//   ...once the scheduler assigned the rank:  registry->SetRank(rank);
//
// Every series carries the labels `role` and `rank`, added when rendered rather than
// when registered: a server or worker learns its rank only after it has been started
// and registered, and its endpoint must already answer by then. Until SetRank the
// page is empty (the target is up, with no series). Besides the role's families every
// page carries dtrain_build_info and the standard process_* series (process_metrics.h).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics/metrics_flags.h"

namespace prometheus {
class Registry;
class Exposer;
}  // namespace prometheus

namespace dtrain::metrics {

class MetricsRegistry {
 public:
  // `role`: "scheduler", "server", "worker", "inference".
  explicit MetricsRegistry(std::string role);
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Starts serving GET /metrics on host:port (0: any free port). UNAVAILABLE naming
  // the address when it cannot be bound; FAILED_PRECONDITION when already serving.
  absl::Status Serve(const std::string& host, int port);
  // The bound port; 0 when not serving.
  int port() const;

  void SetRank(int rank);
  const std::string& role() const { return role_; }

  // The text exposition a scrape gets now.
  std::string Render() const;

  // For the role classes (worker_metrics.cc, ...), which register their families here.
  prometheus::Registry& families() { return *families_; }

 private:
  class Labelled;
  const std::string role_;
  std::shared_ptr<prometheus::Registry> families_;
  std::shared_ptr<Labelled> labelled_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

// From the flags: null when --metrics-port is -1 (metrics off). Otherwise serves,
// writes --metrics-port-file, and logs the address. The scheduler knows its rank (0)
// at once; other roles call SetRank when they have one.
absl::StatusOr<std::unique_ptr<MetricsRegistry>> StartMetrics(const MetricsFlags& flags, const std::string& role);

// A role's registry and its families (`Families` is built from a MetricsRegistry&, e.g.
// server::ServerMetrics); both null when --metrics-port is off.
template <typename Families>
struct RoleMetrics {
  std::unique_ptr<MetricsRegistry> registry;
  std::unique_ptr<Families> families;
};

// StartMetrics, then the role's families. `rank` >= 0 when it is known at start (the
// one scheduler, an inference server); servers and workers set theirs on registering.
template <typename Families>
absl::StatusOr<RoleMetrics<Families>> StartRoleMetrics(const MetricsFlags& flags, const std::string& role,
                                                       int rank = -1) {
  absl::StatusOr<std::unique_ptr<MetricsRegistry>> registry = StartMetrics(flags, role);
  if (!registry.ok()) return registry.status();
  RoleMetrics<Families> m;
  m.registry = *std::move(registry);
  if (m.registry != nullptr) {
    if (rank >= 0) m.registry->SetRank(rank);
    m.families = std::make_unique<Families>(*m.registry);
  }
  return m;
}

}  // namespace dtrain::metrics
