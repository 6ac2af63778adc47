#include "services/launcher/metrics_targets.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net_address.h"

namespace dtrain::launcher {

std::string MetricsTarget::name() const {
  return role == Role::kScheduler ? RoleName(role) : absl::StrCat(RoleName(role), " ", rank);
}

MetricsTargets::MetricsTargets(int64_t base_port, const std::string& dir, bool with_scheduler, int servers, int workers)
    : base_port_(base_port) {
  if (!enabled()) return;
  auto add = [&](Role role, int rank) {
    MetricsTarget t;
    t.role = role;
    t.rank = rank;
    const int index = static_cast<int>(targets_.size()) + (with_scheduler ? 0 : 1);
    t.requested_port = base_port_ == 0 ? 0 : static_cast<int>(base_port_) + index;
    t.port_file = absl::StrCat(dir, "/", RoleName(role), "-", rank, ".metrics-port");
    targets_.push_back(std::move(t));
  };
  if (with_scheduler) add(Role::kScheduler, 0);
  for (int i = 0; i < servers; ++i) add(Role::kServer, i);
  for (int i = 0; i < workers; ++i) add(Role::kWorker, i);
}

const MetricsTarget* MetricsTargets::Find(Role role, int rank) const {
  for (const auto& t : targets_) {
    if (t.role == role && t.rank == rank) return &t;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> MetricsTargets::EnvFor(Role role, int rank) const {
  const MetricsTarget* t = Find(role, rank);
  if (t == nullptr) return {{"DTRAIN_METRICS_PORT", "-1"}, {"DTRAIN_METRICS_PORT_FILE", ""}};
  // Loopback only: a local job's endpoints need not be reachable from elsewhere.
  return {{"DTRAIN_METRICS_PORT", std::to_string(t->requested_port)},
          {"DTRAIN_METRICS_PORT_FILE", t->port_file},
          {"DTRAIN_METRICS_HOST", "127.0.0.1"}};
}

bool MetricsTargets::Collect() {
  bool all = true;
  for (auto& t : targets_) {
    if (t.port != 0) continue;
    std::ifstream in(t.port_file);
    std::string text;
    int port = 0;
    if (in >> text && absl::SimpleAtoi(text, &port) && port > 0) {
      t.port = port;
    } else {
      all = false;
    }
  }
  return all;
}

std::string MetricsTargets::MissingText() const {
  std::vector<std::string> missing;
  for (const auto& t : targets_) {
    if (t.port == 0) missing.push_back(t.name());
  }
  return absl::StrJoin(missing, ", ");
}

std::string MetricsTargets::FileSd(const std::string& host) const {
  std::vector<std::string> entries;
  for (const auto& t : targets_) {
    if (t.port == 0) continue;
    // Labels the exposition does not carry already (role and rank it does).
    entries.push_back(absl::StrCat("  {\"targets\": [\"", JoinHostPort(host, t.port),
                                   "\"], \"labels\": {\"dtrain_process\": \"", RoleName(t.role), "-", t.rank, "\"}}"));
  }
  return absl::StrCat("[\n", absl::StrJoin(entries, ",\n"), "\n]\n");
}

}  // namespace dtrain::launcher
