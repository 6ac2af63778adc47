// TensorFlow 1 style cluster specs, as seed users started their jobs on every
// machine:
//   mnist.py --ps_hosts=h1:2222 --worker_hosts=h2:2222,h3:2222 --job_name=worker --task_index=0
//   TF_CONFIG='{"cluster": {"chief": [...], "worker": [...], "ps": [...]},
//               "task": {"type": "worker", "index": 0}}'
// parsed, checked and mapped to dtrain's roles and ranks. No gRPC, no processes:
// tf_run_command.cc acts on the result.
//
// The mapping (README "TensorFlow 1 style launch"): ps i is server rank i, serving at
// its listed host:port; worker i is worker rank i. A TF_CONFIG chief is worker rank
// 0 and its workers follow (TF worker i is rank i+1); "master" is the chief's old
// name. Worker rank 0 also hosts the scheduler, at its own listed host:port (a dtrain
// worker serves nothing there) or at --scheduler_port on that host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cluster_spec.h"
#include "common/role.h"

namespace dtrain::launcher {

struct TfClusterLaunch {
  ClusterSpec cluster;  // host:port per rank; the chief (if any) is worker[0]
  // A TF "ps" task is a dtrain server; a "worker" or "chief" task a worker.
  Role role = Role::kWorker;
  int rank = 0;  // dtrain's rank within `role`
  // The task in the user's words, for messages: "--job_name=worker --task_index=1",
  // "TF_CONFIG task chief 0".
  std::string task_text;
  // The same task as the spec lists it: "worker 1", "chief 0", "ps 0".
  std::string task_name;
  // Where the spec came from: "--ps_hosts/--worker_hosts" or "TF_CONFIG".
  std::string source;
  // Parts of the spec that dtrain does not use, each a sentence to log (an evaluator).
  std::vector<std::string> notes;

  // This task's host:port as listed.
  const std::string& address() const { return role == Role::kServer ? cluster.ps[rank] : cluster.worker[rank]; }
  // The name of the entry at `rank` of `role` as the spec lists it ("chief 0", "worker 2").
  std::string NameOf(Role role, int rank) const;
  bool has_chief = false;
};

struct TfFlags {
  std::string ps_hosts;  // "h1:2222,h2:2222"
  std::string worker_hosts;
  std::string job_name;     // "ps" or "worker"
  int64_t task_index = -1;  // required
};

// INVALID_ARGUMENT naming the flag and what is wrong: a host that is not host:port
// (an IPv6 one needs brackets), an empty list or entry, a host:port listed twice, an
// unknown --job_name, a --task_index outside its list (naming the list and its length).
absl::StatusOr<TfClusterLaunch> FromTfFlags(const TfFlags& flags);

// The same checks for TF_CONFIG's JSON; an "evaluator" task is refused (dtrain's
// workers validate every epoch), an evaluator in the cluster is ignored with a note.
absl::StatusOr<TfClusterLaunch> FromTfConfig(absl::string_view json);

// Where every node finds the scheduler: worker 0's host with its listed port, or
// `scheduler_port` when it is not 0.
std::string SchedulerAddressOf(const ClusterSpec& cluster, int scheduler_port);

}  // namespace dtrain::launcher
