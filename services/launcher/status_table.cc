#include "services/launcher/status_table.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace dtrain::launcher {
namespace {

std::string RoleText(v1::Role role) { return absl::AsciiStrToLower(absl::StripPrefix(v1::Role_Name(role), "ROLE_")); }

std::string StateText(v1::NodeState state) {
  return std::string(absl::StripPrefix(v1::NodeState_Name(state), "NODE_STATE_"));
}

std::string HeardText(int64_t now_ms, int64_t heard_ms) {
  if (heard_ms <= 0) return "never";
  return absl::StrFormat("%.1f s ago", std::max<int64_t>(0, now_ms - heard_ms) / 1000.0);
}

// The last column: "dead for 12 s (heartbeat stream broke)" for a dead node the
// scheduler said since when, else when it was last heard.
std::string LastColumn(const v1::NodeInfo& n, int64_t now_ms) {
  if (n.state() != v1::NODE_STATE_DEAD || n.dead_since_unix_ms() <= 0) {
    return HeardText(now_ms, n.last_heard_unix_ms());
  }
  std::string text = absl::StrFormat("dead for %.0f s", std::max<int64_t>(0, now_ms - n.dead_since_unix_ms()) / 1000.0);
  if (!n.death_reason().empty()) absl::StrAppend(&text, " (", n.death_reason(), ")");
  return text;
}

// Replication: each home server's chain, its first live member marked as the one
// serving the weights. A restarted member is back in a key's chain only once a partner
// copied it the key (docs/recovery.md), which the scheduler does not see: it is marked
// as restarted and starred only when no other member is alive.
std::string ChainsText(const v1::GetStatusResponse& status) {
  const v1::ClusterView& c = status.cluster();
  const int servers = c.num_servers();
  const int r = c.replication();
  if (r <= 1 || servers <= 0 || r > servers) return "";
  std::vector<const v1::NodeInfo*> by_rank(servers, nullptr);
  for (const auto& n : status.nodes()) {
    if (n.role() == v1::ROLE_SERVER && n.rank() >= 0 && n.rank() < servers) by_rank[n.rank()] = &n;
  }
  auto alive = [&](int rank) {
    const v1::NodeInfo* n = by_rank[rank];
    return n != nullptr && n->state() != v1::NODE_STATE_DEAD && n->state() != v1::NODE_STATE_FINISHED;
  };
  auto restarted = [&](int rank) { return by_rank[rank] != nullptr && by_rank[rank]->restarts() > 0; };
  std::string out =
      absl::StrFormat("key ranges (--replication %d): chain of each home server, * = serves the weights\n", r);
  for (int h = 0; h < servers; ++h) {
    absl::StrAppendFormat(&out, "  range %d:", h);
    int head = -1;
    for (int i = 0; i < r && head < 0; ++i) {
      if (alive((h + i) % servers) && !restarted((h + i) % servers)) head = (h + i) % servers;
    }
    for (int i = 0; i < r && head < 0; ++i) {
      if (alive((h + i) % servers)) head = (h + i) % servers;
    }
    for (int i = 0; i < r; ++i) {
      const int m = (h + i) % servers;
      std::string mark = m == head ? "*" : "";
      if (!alive(m)) {
        mark += " (dead)";
      } else if (restarted(m)) {
        mark += " (restarted)";
      }
      absl::StrAppendFormat(&out, " server %d%s", m, mark);
    }
    if (head < 0) absl::StrAppend(&out, "  NO LIVE REPLICA");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

// An elastic job's membership as committed: "workers: 3 (elastic 2:4, generation 2 from
// step 180)"; "" for a job that is not elastic.
std::string MembershipText(const v1::GetStatusResponse& status) {
  if (!status.has_membership() || status.membership().generations_size() == 0) return "";
  const v1::MembershipState& m = status.membership();
  const int latest = m.generations_size() - 1;
  return absl::StrFormat("workers: %d (elastic %d:%d, generation %d from step %d)\n",
                         m.generations(latest).ranks_size(), m.min_workers(), m.max_workers(), latest,
                         m.generations(latest).from_step());
}

}  // namespace

std::string FormatStatus(const v1::GetStatusResponse& status, const std::string& scheduler) {
  const v1::ClusterView& c = status.cluster();
  std::string out = absl::StrFormat("job at %s: %s, %d worker%s, %d server%s\n", scheduler,
                                    c.kv_store().empty() ? "?" : c.kv_store(), c.num_workers(),
                                    c.num_workers() == 1 ? "" : "s", c.num_servers(), c.num_servers() == 1 ? "" : "s");
  absl::StrAppend(&out, MembershipText(status));
  size_t address_width = 7;
  for (const auto& n : status.nodes()) address_width = std::max(address_width, n.address().size());
  const int aw = static_cast<int>(address_width);
  // An older scheduler sends no clock: this machine's stands in.
  const int64_t now_ms = status.now_unix_ms() > 0 ? status.now_unix_ms() : absl::ToUnixMillis(absl::Now());
  absl::StrAppendFormat(&out, "%-7s %4s  %-*s  %-10s %3s %8s %8s %10s  %s\n", "ROLE", "RANK", aw, "ADDRESS", "STATE",
                        "INC", "RESTARTS", "STEP", "SAMPLES/S", "LAST HEARD");
  bool any_worker = false;
  int64_t lo = 0, hi = 0;
  double total_speed = 0;
  for (const auto& n : status.nodes()) {
    const bool worker = n.role() == v1::ROLE_WORKER;
    absl::StrAppendFormat(&out, "%-7s %4d  %-*s  %-10s %3s %8d %8s %10s  %s\n", RoleText(n.role()), n.rank(), aw,
                          n.address().empty() ? "-" : n.address(), StateText(n.state()),
                          n.incarnation() > 0 ? absl::StrCat(n.incarnation()) : "-", n.restarts(),
                          worker ? absl::StrCat(n.last_step()) : "-",
                          worker ? absl::StrFormat("%.1f", n.samples_per_sec()) : "-", LastColumn(n, now_ms));
    if (!worker || n.state() == v1::NODE_STATE_DEAD) continue;
    lo = any_worker ? std::min(lo, n.last_step()) : n.last_step();
    hi = any_worker ? std::max(hi, n.last_step()) : n.last_step();
    if (n.state() == v1::NODE_STATE_ALIVE) total_speed += n.samples_per_sec();
    any_worker = true;
  }
  if (status.nodes_size() == 0) absl::StrAppend(&out, "(no node has registered yet)\n");
  if (any_worker && status.has_worker_lag()) {
    // Steps of one moment (the scheduler's WorkerLag); the STEP column's latest reports
    // are up to a heartbeat apart, so their spread is not a lag.
    const v1::WorkerLag& lag = status.worker_lag();
    absl::StrAppendFormat(&out, "workers: steps %d..%d %.1f s ago (lag %d), %.1f samples/s in all\n",
                          lag.slowest_step(), lag.fastest_step(),
                          std::max<int64_t>(0, now_ms - lag.at_unix_ms()) / 1000.0, lag.steps(), total_speed);
  } else if (any_worker) {
    absl::StrAppendFormat(&out, "workers: steps %d..%d (lag not sampled yet), %.1f samples/s in all\n", lo, hi,
                          total_speed);
  }
  absl::StrAppend(&out, ChainsText(status));
  return out;
}

}  // namespace dtrain::launcher
