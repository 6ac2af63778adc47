// A static cluster spec: every parameter server's and every worker's host:port,
// listed in rank order, as a TensorFlow 1 style launch gives them
// (`dtrain run --ps_hosts=... --worker_hosts=...`, or TF_CONFIG; see
// services/launcher/tf_cluster_spec.h for the parsing).
//
// Every node of such a job derives everything (its rank, the scheduler's address,
// the job's size) from its own copy of the spec, so copies that disagree would make a
// job that silently differs from what each node was told. `dtrain run` hands the
// spec's canonical text to each process it starts (kClusterSpecEnv); the node sends
// it when it registers (RegisterRequest.cluster_spec) and the scheduler, which got
// the copy of the node that hosts it, refuses a node whose copy differs, naming the
// difference (CompareClusterSpecs).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dtrain {

// Set by `dtrain run` for the processes of a spec-launched job: the canonical text.
// Every role reads it as its --cluster-spec flag's environment name.
inline constexpr char kClusterSpecEnv[] = "DTRAIN_CLUSTER_SPEC";

// Longer canonical texts are refused when parsed, so a Register request stays small
// (2000 entries of 30 bytes: far beyond any parameter-server job started by hand).
inline constexpr size_t kMaxClusterSpecBytes = 64 * 1024;

struct ClusterSpec {
  std::vector<std::string> ps;      // server rank i listens at ps[i]
  std::vector<std::string> worker;  // worker rank i is worker[i] (a TF chief comes first)

  bool operator==(const ClusterSpec& o) const { return ps == o.ps && worker == o.worker; }
  bool operator!=(const ClusterSpec& o) const { return !(*this == o); }
};

// "ps=10.0.0.1:2222,10.0.0.2:2222;worker=10.0.0.3:2222". Entries are host:port as
// given (an IPv6 host in brackets), so the text holds no other ',', ';' or '='.
std::string CanonicalClusterSpec(const ClusterSpec& spec);

// The inverse; INVALID_ARGUMENT naming what is wrong (also above kMaxClusterSpecBytes).
absl::StatusOr<ClusterSpec> ParseCanonicalClusterSpec(absl::string_view text);

// What differs between two specs, in the launch flags' words, empty when they agree.
// `mine_owner`/`theirs_owner` are possessives: with "worker 1's" and "the scheduler's
// (worker 0's)":
//   "worker 1's --ps_hosts is 10.0.0.2:2223 but the scheduler's (worker 0's) is 10.0.0.2:2222"
// Each list that differs is named; a long one is cut to its first entry that differs.
std::string DescribeClusterSpecDifference(const ClusterSpec& mine, absl::string_view mine_owner,
                                          const ClusterSpec& theirs, absl::string_view theirs_owner);

// The scheduler's check of a registering node. Either text empty: nothing to compare
// (a node or a scheduler started without a spec, e.g. by hand). Otherwise
// FAILED_PRECONDITION with DescribeClusterSpecDifference's text when the specs differ,
// INVALID_ARGUMENT when the node's text does not parse.
// `node_name` is "worker 1", "server 0".
absl::Status CompareClusterSpecs(absl::string_view scheduler_text, absl::string_view node_text,
                                 absl::string_view node_name);

}  // namespace dtrain
