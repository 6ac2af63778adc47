#include "common/metrics/registry.h"

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/metrics/process_metrics.h"
#include "common/net_address.h"
#include "common/port_file.h"

namespace dtrain::metrics {
// What the exposer sees: the families, with role and rank put in front of every
// series' labels; nothing while the rank is unknown.
class MetricsRegistry::Labelled : public prometheus::Collectable {
 public:
  Labelled(std::string role, std::shared_ptr<prometheus::Registry> families)
      : role_(std::move(role)), families_(std::move(families)) {}

  void SetRank(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    rank_ = std::to_string(rank);
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::string rank;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rank = rank_;
    }
    if (rank.empty()) return {};
    std::vector<prometheus::MetricFamily> out = families_->Collect();
    // Every process's build and /proc figures, whatever its role registered.
    for (auto& family : CollectProcessFamilies()) out.push_back(std::move(family));
    for (auto& family : out) {
      for (auto& metric : family.metric) {
        metric.label.insert(metric.label.begin(), {{"role", role_}, {"rank", rank}});
      }
    }
    return out;
  }

 private:
  const std::string role_;
  const std::shared_ptr<prometheus::Registry> families_;
  mutable std::mutex mu_;
  std::string rank_;  // empty: not known yet
};

MetricsRegistry::MetricsRegistry(std::string role)
    : role_(std::move(role)),
      families_(std::make_shared<prometheus::Registry>()),
      labelled_(std::make_shared<Labelled>(role_, families_)) {}

MetricsRegistry::~MetricsRegistry() = default;

absl::Status MetricsRegistry::Serve(const std::string& host, int port) {
  if (exposer_ != nullptr) return absl::FailedPreconditionError("the metrics endpoint is already serving");
  // Bracketed for IPv6 hosts ("[::1]:9100"), which civetweb accepts.
  const std::string address = JoinHostPort(host, port);
  try {
    // Its threads' stacks go through the floor in thread_stack_floor.h.
    exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    // civetweb's own text ("null context when constructing CivetServer") names neither.
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, " (port in use, or no such address): ", e.what()));
  }
  const std::vector<int> ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? port : ports.front();
  exposer_->RegisterCollectable(labelled_);
  return absl::OkStatus();
}

int MetricsRegistry::port() const { return port_; }

void MetricsRegistry::SetRank(int rank) { labelled_->SetRank(rank); }

std::string MetricsRegistry::Render() const { return prometheus::TextSerializer().Serialize(labelled_->Collect()); }

absl::StatusOr<std::unique_ptr<MetricsRegistry>> StartMetrics(const MetricsFlags& flags, const std::string& role) {
  if (absl::Status s = CheckMetricsFlags(flags); !s.ok()) return s;
  if (!flags.enabled()) return std::unique_ptr<MetricsRegistry>();
  auto registry = std::make_unique<MetricsRegistry>(role);
  if (absl::Status s = registry->Serve(flags.host, static_cast<int>(flags.port)); !s.ok()) return s;
  if (!flags.port_file.empty()) {
    if (absl::Status s = WritePortFile(flags.port_file, registry->port()); !s.ok()) return s;
  }
  DTRAIN_LOG(INFO) << "metrics at http://" << flags.host << ":" << registry->port() << "/metrics";
  return registry;
}

}  // namespace dtrain::metrics
