#include "common/job_spec.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/kv/store_config.h"

namespace dtrain {
namespace {

constexpr uint32_t kAllJobFields = (1u << 9) - 1;

// The environment names of `field` when `which` lets it read them, else none.
std::vector<std::string> EnvOf(const JobSpecFlags& which, JobField field, std::vector<std::string> names) {
  if ((which.from_env & field) == 0) return {};
  return names;
}

const char* RejoinHelp(const JobSpecFlags& which) {
  if (which.role == Role::kServer) {
    return "seconds a dead worker may take to come back (accepted for every role; a server does not use it yet)";
  }
  return "seconds a dead worker may take to come back (a restart takes its rank) before the job fails; 0: a "
         "death fails waits at once, naming the dead worker";
}

// The job's size and layout: workers, servers, replication.
void AddShapeFlags(FlagSet& flags, JobSpec* spec, const JobSpecFlags& which) {
  if (which.fields & kJobNumWorkers) {
    flags.AddInt("num-workers", &spec->num_workers, "workers in the job",
                 EnvOf(which, kJobNumWorkers, {"DTRAIN_NUM_WORKERS", "DMLC_NUM_WORKER"}));
  }
  if (which.fields & kJobNumServers) {
    flags.AddInt("num-servers", &spec->num_servers, "parameter servers in the job",
                 EnvOf(which, kJobNumServers, {"DTRAIN_NUM_SERVERS", "DMLC_NUM_SERVER"}));
  }
  if (which.fields & kJobReplication) {
    flags.AddInt("replication", &spec->replication,
                 "copies of each key range, on that many servers (1..--num-servers; 1: none); a dead server's "
                 "ranges are served by the next copy; the scheduler refuses nodes started with another value",
                 EnvOf(which, kJobReplication, {"DTRAIN_REPLICATION"}));
  }
}

// How the workers' updates are merged: the mode and its staleness.
void AddModeFlags(FlagSet& flags, JobSpec* spec, const JobSpecFlags& which) {
  if (which.fields & kJobMode) {
    AddParsedValue(
        flags, "kv-store", &spec->mode, ParseKVStoreMode, KVStoreModeName(spec->mode),
        "kvstore mode: local, device, dist_sync, dist_device_sync, dist_async or dist_ssp (the scheduler tells "
        "it to every node)",
        EnvOf(which, kJobMode, {"DTRAIN_KV_STORE"}));
  }
  if (which.fields & kJobStaleness) {
    flags.AddInt("staleness", &spec->staleness,
                 "dist_ssp: steps a worker may run ahead of the slowest (0..64; 0 is dist_sync bit for bit)",
                 EnvOf(which, kJobStaleness, {"DTRAIN_STALENESS"}));
  }
}

// The job's id and deadlines.
void AddIdentityAndDeadlineFlags(FlagSet& flags, JobSpec* spec, const JobSpecFlags& which) {
  if (which.fields & kJobId) {
    flags.AddString("job-id", &spec->job_id,
                    "the job's id, given to every process; another job's scheduler and servers refuse a node "
                    "(empty: the scheduler's; a scheduler takes the first node's, else makes one up)",
                    EnvOf(which, kJobId, {"DTRAIN_JOB_ID"}));
  }
  if (which.fields & kJobRegisterTimeout) {
    flags.AddDouble("register-timeout", &spec->register_timeout_s,
                    "seconds to wait for every node to register (the scheduler exits 1 if the job is not complete "
                    "this long after it started)",
                    EnvOf(which, kJobRegisterTimeout, {"DTRAIN_REGISTER_TIMEOUT"}));
  }
  if (which.fields & kJobSyncTimeout) {
    flags.AddDouble("sync-timeout", &spec->sync_timeout_s,
                    "seconds a step (a worker's pull, a server's parked pull) waits for the other workers' "
                    "pushes before failing, naming who is missing",
                    EnvOf(which, kJobSyncTimeout, {"DTRAIN_SYNC_TIMEOUT"}));
  }
  if (which.fields & kJobRejoinTimeout) {
    flags.AddDouble("rejoin-timeout", &spec->rejoin_timeout_s, RejoinHelp(which),
                    EnvOf(which, kJobRejoinTimeout, {"DTRAIN_REJOIN_TIMEOUT"}));
  }
}

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

absl::Status CheckShape(const JobSpec& s, uint32_t fields) {
  if ((fields & kJobNumWorkers) && s.num_workers < 1) {
    return Bad(absl::StrCat("--num-workers must be at least 1, got ", s.num_workers));
  }
  if ((fields & kJobNumServers) && s.num_servers < 0) {
    return Bad(absl::StrCat("--num-servers must not be negative, got ", s.num_servers));
  }
  // Each replica of a key range lives on another server (common/kv/replica_chain.h).
  if ((fields & kJobReplication) &&
      (s.replication < 1 || ((fields & kJobNumServers) && s.num_servers > 0 && s.replication > s.num_servers))) {
    return Bad(absl::StrCat("--replication must be in 1..--num-servers (", s.num_servers, "), got ", s.replication));
  }
  return absl::OkStatus();
}

absl::Status CheckMode(const JobSpec& s, uint32_t fields) {
  if ((fields & kJobStaleness) == 0) return absl::OkStatus();
  if (s.staleness < 0 || s.staleness > kv::kMaxStaleness) {
    return Bad(absl::StrCat("--staleness: must be in 0..", kv::kMaxStaleness, ", got ", s.staleness));
  }
  if ((fields & kJobMode) && s.staleness != 0 && s.mode != KVStoreMode::kDistSsp) {
    return Bad(absl::StrCat("--staleness: is for --kv-store dist_ssp, not ", KVStoreModeName(s.mode)));
  }
  return absl::OkStatus();
}

absl::Status CheckIdentityAndDeadlines(const JobSpec& s, uint32_t fields) {
  if ((fields & kJobId) && s.job_id.size() > kMaxJobIdFlagBytes) {
    return Bad(absl::StrCat("--job-id has ", s.job_id.size(), " bytes, the limit is ", kMaxJobIdFlagBytes));
  }
  if ((fields & kJobRegisterTimeout) && !(s.register_timeout_s > 0)) {
    return Bad(absl::StrCat("--register-timeout must be positive, got ", s.register_timeout_s));
  }
  if ((fields & kJobSyncTimeout) && !(s.sync_timeout_s > 0 && s.sync_timeout_s <= kMaxSyncTimeoutSeconds)) {
    return Bad(absl::StrCat("--sync-timeout must be in (0, ", kMaxSyncTimeoutSeconds,
                            "] seconds (the servers refuse a longer wait), got ", s.sync_timeout_s));
  }
  if ((fields & kJobRejoinTimeout) && !(s.rejoin_timeout_s >= 0)) {
    return Bad(absl::StrCat("--rejoin-timeout must not be negative, got ", s.rejoin_timeout_s));
  }
  return absl::OkStatus();
}

}  // namespace

JobSpecFlags NodeJobSpecFlags(Role role) {
  constexpr uint32_t kShape = kJobNumWorkers | kJobNumServers | kJobReplication;
  constexpr uint32_t kRecovery = kJobId | kJobRegisterTimeout | kJobRejoinTimeout;
  uint32_t fields = 0;
  switch (role) {
    case Role::kScheduler: fields = kShape | kJobMode | kRecovery; break;
    case Role::kServer: fields = kShape | kRecovery | kJobSyncTimeout; break;
    case Role::kWorker: fields = kAllJobFields; break;
  }
  return JobSpecFlags{fields, fields, role};
}

JobSpecFlags LaunchJobSpecFlags() {
  return JobSpecFlags{kJobNumWorkers | kJobNumServers | kJobReplication | kJobMode | kJobId | kJobRejoinTimeout,
                      kJobId | kJobRejoinTimeout, std::nullopt};
}

void AddJobSpecFlags(FlagSet& flags, JobSpec* spec, const JobSpecFlags& which) {
  AddShapeFlags(flags, spec, which);
  AddModeFlags(flags, spec, which);
  AddIdentityAndDeadlineFlags(flags, spec, which);
}

absl::Status CheckJobSpec(const JobSpec& spec, const JobSpecFlags& which) {
  if (absl::Status s = CheckShape(spec, which.fields); !s.ok()) return s;
  if (absl::Status s = CheckMode(spec, which.fields); !s.ok()) return s;
  return CheckIdentityAndDeadlines(spec, which.fields);
}

}  // namespace dtrain
