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
#include "common/tls/tls_flags.h"
#include "common/defaults.h"

namespace dtrain {

// Whose flags: picks the ps-lite rank variable (DMLC_WORKER_ID / DMLC_SERVER_ID).
enum class ClusterRole { kAny, kServer, kWorker };

struct ClusterFlags {
  std::string scheduler;    // host:port; DTRAIN_SCHEDULER_ADDR or DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT
  int64_t num_workers = 1;  // DTRAIN_NUM_WORKERS, DMLC_NUM_WORKER
  int64_t num_servers = 1;  // DTRAIN_NUM_SERVERS, DMLC_NUM_SERVER
  // Replicas per key range, 1..num_servers (docs/recovery.md); DTRAIN_REPLICATION.
  int64_t replication = 1;
  int64_t rank = -1;                  // DTRAIN_RANK, DMLC_WORKER_ID / DMLC_SERVER_ID; -1: the scheduler assigns
  std::string host;                   // address others reach me at; DTRAIN_NODE_HOST, DMLC_NODE_HOST
  std::string interface;              // take `host` from this network interface; DTRAIN_INTERFACE, DMLC_INTERFACE
  std::string bind_host = "0.0.0.0";  // where to listen (0.0.0.0: every interface, IPv6 too); DTRAIN_BIND_HOST
  int64_t port = 0;                   // my listening port (0: any free one); DTRAIN_PORT
  std::string host_origin;            // set by FinishClusterFlags: how `host` was chosen, for the log
  double register_timeout_s = kDefaultRegisterTimeoutSeconds;  // DTRAIN_REGISTER_TIMEOUT
  double heartbeat_interval_s = 1;                             // DTRAIN_HEARTBEAT_INTERVAL
  // Recovery (docs/recovery.md), every role. The scheduler has its own flags of the
  // same names (it does not use ClusterFlags).
  std::string job_id;  // DTRAIN_JOB_ID; empty: the scheduler's. At most kMaxJobIdFlagBytes.
  // DTRAIN_REJOIN_TIMEOUT; 0: a dead worker fails this one at once. Servers accept it
  // (one setting for every role) but do not wait on a dead worker with it yet.
  double rejoin_timeout_s = 0;
  // --tls-cert/--tls-key/--tls-ca/--insecure (DTRAIN_TLS_*); main applies them with
  // ApplyTlsFlags, knowing whether it listens.
  TlsFlags tls;
};

// The longest --job-id accepted: what the parameter servers keep (kv::kMaxJobIdBytes).
inline constexpr size_t kMaxJobIdFlagBytes = 64;

void AddClusterFlags(FlagSet& flags, ClusterFlags* out, ClusterRole role = ClusterRole::kAny);

// After parsing: fills `scheduler` from DMLC_PS_ROOT_URI/PORT when unset (an IPv6
// URI gets brackets), and checks ranges (INVALID_ARGUMENT naming the flag). When
// `host` is unset it is chosen as ps-lite does: the address of --interface if given,
// else the local address of the route to the scheduler (so nodes on other machines
// can reach this one), else 127.0.0.1; `host_origin` says which.
// `need_scheduler`: the address must be known.
absl::Status FinishClusterFlags(ClusterFlags* flags, bool need_scheduler, const FlagSet::EnvLookup& env = nullptr);

}  // namespace dtrain
