// The job's shape, the same for every process of one job: how many workers and
// servers, how keys are replicated, the kvstore mode, the job's id and its deadlines.
// One struct, one flag binding and one validation, used by the scheduler, the server,
// the worker and `dtrain launch`, so that a flag, its environment names, its default and
// its checks are written once.
//
// Each program declares the settings it uses (JobSpecFlags): the scheduler has no
// --sync-timeout, the server no --kv-store (worker 0 configures it), the launcher reads
// no environment but DTRAIN_JOB_ID and DTRAIN_REJOIN_TIMEOUT. Environment names, in the order they are consulted:
//   --num-workers       DTRAIN_NUM_WORKERS, DMLC_NUM_WORKER
//   --num-servers       DTRAIN_NUM_SERVERS, DMLC_NUM_SERVER
//   --replication       DTRAIN_REPLICATION
//   --kv-store          DTRAIN_KV_STORE
//   --staleness         DTRAIN_STALENESS
//   --job-id            DTRAIN_JOB_ID
//   --register-timeout  DTRAIN_REGISTER_TIMEOUT
//   --sync-timeout      DTRAIN_SYNC_TIMEOUT
//   --rejoin-timeout    DTRAIN_REJOIN_TIMEOUT
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/defaults.h"
#include "common/flags.h"
#include "common/kvstore_mode.h"
#include "common/role.h"

namespace dtrain {

struct JobSpec {
  int64_t num_workers = 1;
  int64_t num_servers = 1;
  // Copies of each key range, 1..num_servers, each on another server (docs/recovery.md).
  int64_t replication = 1;
  KVStoreMode mode = kDefaultJobMode;
  // dist_ssp: steps a worker may run ahead of the slowest, 0..kv::kMaxStaleness.
  int64_t staleness = 0;
  // Empty: the scheduler's (a node), the first node's or a new one (the scheduler).
  // At most kMaxJobIdFlagBytes.
  std::string job_id;
  double register_timeout_s = kDefaultRegisterTimeoutSeconds;
  double sync_timeout_s = kDefaultSyncTimeoutSeconds;
  // 0: a dead worker fails the others at once.
  double rejoin_timeout_s = 0;
};

// The longest --job-id accepted: what the parameter servers keep (kv::kMaxJobIdBytes).
inline constexpr size_t kMaxJobIdFlagBytes = 64;
// The longest --sync-timeout: the servers refuse a request that says it will wait
// longer (a cap on what the wire may ask of them), so a longer one would fail every pull.
inline constexpr double kMaxSyncTimeoutSeconds = 86400;

// JobSpec's settings, as bits of JobSpecFlags::fields.
enum JobField : uint32_t {
  kJobNumWorkers = 1u << 0,
  kJobNumServers = 1u << 1,
  kJobReplication = 1u << 2,
  kJobMode = 1u << 3,
  kJobStaleness = 1u << 4,
  kJobId = 1u << 5,
  kJobRegisterTimeout = 1u << 6,
  kJobSyncTimeout = 1u << 7,
  kJobRejoinTimeout = 1u << 8,
};

// Which settings a program declares, and which of those fall back to their
// environment names.
struct JobSpecFlags {
  uint32_t fields = 0;
  uint32_t from_env = 0;
  // The node whose flags these are, for the help texts; none for the launcher.
  std::optional<Role> role;
};

// What each node declares: the scheduler the shape, mode and deadlines it enforces;
// the server the shape and its deadlines; the worker all of them.
JobSpecFlags NodeJobSpecFlags(Role role);
// `dtrain launch`: the shape and the mode from its command line only (the environment
// it was started in is its children's business); the job id and the rejoin timeout,
// which it hands to every child, also from DTRAIN_JOB_ID and DTRAIN_REJOIN_TIMEOUT.
JobSpecFlags LaunchJobSpecFlags();

// Declares the flags `which` names, bound to `spec`; the defaults shown are spec's.
void AddJobSpecFlags(FlagSet& flags, JobSpec* spec, const JobSpecFlags& which);

// After parsing: checks the settings `which` declares, each INVALID_ARGUMENT naming its
// flag and the value given ("--num-workers must be at least 1, got 0").
absl::Status CheckJobSpec(const JobSpec& spec, const JobSpecFlags& which);

}  // namespace dtrain
