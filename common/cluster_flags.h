// Flags every role shares: where the scheduler is, how big the job is, who I am.
// Each has a DTRAIN_* environment name and, where ps-lite had one, its DMLC_* name,
// so a ps-lite style hand launch works unchanged:
//   export DMLC_PS_ROOT_URI=10.0.0.1 DMLC_PS_ROOT_PORT=9091 DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=1
//   DMLC_ROLE=server dtrain run
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/job_spec.h"
#include "common/role.h"
#include "common/tls/tls_flags.h"
#include "common/defaults.h"

namespace dtrain {

struct ClusterFlags {
  std::string scheduler;  // host:port; DTRAIN_SCHEDULER_ADDR or DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT
  // The job's shape, mode, id and deadlines, as this role declares them (common/job_spec.h).
  JobSpec job;
  int64_t rank = -1;                  // DTRAIN_RANK, DMLC_WORKER_ID / DMLC_SERVER_ID; -1: the scheduler assigns
  std::string host;                   // address others reach me at; DTRAIN_NODE_HOST, DMLC_NODE_HOST
  std::string interface;              // take `host` from this network interface; DTRAIN_INTERFACE, DMLC_INTERFACE
  std::string bind_host = "0.0.0.0";  // where to listen (0.0.0.0: every interface, IPv6 too); DTRAIN_BIND_HOST
  int64_t port = 0;                   // my listening port (0: any free one); DTRAIN_PORT
  std::string host_origin;            // set by FinishClusterFlags: how `host` was chosen, for the log
  double heartbeat_interval_s = kDefaultHeartbeatIntervalSeconds;  // DTRAIN_HEARTBEAT_INTERVAL
  // A spec-launched job's canonical cluster spec (common/cluster_spec.h), sent when
  // registering; "" for none. DTRAIN_CLUSTER_SPEC, which `dtrain run` sets.
  std::string cluster_spec;
  // --tls-cert/--tls-key/--tls-ca/--insecure (DTRAIN_TLS_*); main applies them with
  // ApplyTlsFlags, knowing whether it listens.
  TlsFlags tls;
  // --tcp-congestion (DTRAIN_TCP_CONGESTION): the TCP congestion control of this node's
  // gRPC sockets; "": the system's. FinishClusterFlags applies it (SetTcpCongestion).
  std::string tcp_congestion;
};

// `role` (a server or a worker) picks the ps-lite rank variable (DMLC_SERVER_ID /
// DMLC_WORKER_ID) and the JobSpec settings declared (NodeJobSpecFlags).
void AddClusterFlags(FlagSet& flags, ClusterFlags* out, Role role);

// After parsing: fills `scheduler` from DMLC_PS_ROOT_URI/PORT when unset (an IPv6
// URI gets brackets), and checks ranges (INVALID_ARGUMENT naming the flag; the job's
// settings with CheckJobSpec for `role`). When `host` is unset it is chosen as ps-lite
// does: the address of --interface if given, else the local address of the route to
// the scheduler (so nodes on other machines can reach this one), else 127.0.0.1;
// `host_origin` says which. A --tcp-congestion the kernel refuses is INVALID_ARGUMENT;
// one it takes is set for the process's gRPC sockets from then on.
// `need_scheduler`: the address must be known.
absl::Status FinishClusterFlags(ClusterFlags* flags, Role role, bool need_scheduler,
                                const FlagSet::EnvLookup& env = nullptr);

}  // namespace dtrain
