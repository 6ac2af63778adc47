#include "common/cluster_flags.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/net_address.h"

namespace dtrain {

void AddClusterFlags(FlagSet& flags, ClusterFlags* out, ClusterRole role) {
  flags.AddString("scheduler", &out->scheduler, "host:port of the scheduler (else DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT)",
                  {"DTRAIN_SCHEDULER_ADDR"});
  flags.AddInt("num-workers", &out->num_workers, "workers in the job", {"DTRAIN_NUM_WORKERS", "DMLC_NUM_WORKER"});
  flags.AddInt("num-servers", &out->num_servers, "parameter servers in the job",
               {"DTRAIN_NUM_SERVERS", "DMLC_NUM_SERVER"});
  flags.AddInt("replication", &out->replication,
               "copies of each key range, on that many servers (1: none); a dead server's ranges are "
               "served by the next copy",
               {"DTRAIN_REPLICATION"});
  std::vector<std::string> rank_env = {"DTRAIN_RANK"};
  if (role == ClusterRole::kWorker) rank_env.push_back("DMLC_WORKER_ID");
  if (role == ClusterRole::kServer) rank_env.push_back("DMLC_SERVER_ID");
  flags.AddInt("rank", &out->rank,
               "this node's rank within its role (the scheduler refuses a taken or out-of-range one); "
               "-1: the scheduler assigns",
               rank_env);
  flags.AddString("host", &out->host,
                  "address other nodes reach this one at (default: --interface's address, else the local "
                  "address of the route to the scheduler)",
                  {"DTRAIN_NODE_HOST", "DMLC_NODE_HOST"});
  flags.AddString("interface", &out->interface, "network interface whose address is --host (e.g. eth0)",
                  {"DTRAIN_INTERFACE", "DMLC_INTERFACE"});
  flags.AddString("bind-host", &out->bind_host, "address to listen on (0.0.0.0: every interface, IPv6 too)",
                  {"DTRAIN_BIND_HOST"});
  flags.AddInt("port", &out->port, "port this node listens on; 0: any free one", {"DTRAIN_PORT"});
  flags.AddDouble("register-timeout", &out->register_timeout_s, "seconds to wait for every node to register",
                  {"DTRAIN_REGISTER_TIMEOUT"});
  flags.AddDouble("heartbeat-interval", &out->heartbeat_interval_s, "seconds between heartbeats to the scheduler",
                  {"DTRAIN_HEARTBEAT_INTERVAL"});
  flags.AddString("job-id", &out->job_id,
                  "the job this node belongs to; another job's scheduler and servers refuse it (empty: the "
                  "scheduler's)",
                  {"DTRAIN_JOB_ID"});
  flags.AddDouble("rejoin-timeout", &out->rejoin_timeout_s,
                  role == ClusterRole::kServer
                      ? "seconds a dead worker may take to come back (accepted for every role; a server does "
                        "not use it yet)"
                      : "seconds a dead worker may take to come back (restarted with its rank) before this one "
                        "fails; 0: fail at once naming it",
                  {"DTRAIN_REJOIN_TIMEOUT"});
  AddTlsFlags(flags, &out->tls);
}

namespace {

// An environment variable through `env` (the process environment when `env` is empty); "" when unset.
std::string LookupEnv(const FlagSet::EnvLookup& env, const char* name) {
  const char* v = env ? env(name) : std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// Without --scheduler: ps-lite's DMLC_PS_ROOT_URI + DMLC_PS_ROOT_PORT, when both are set.
absl::Status SchedulerFromPsLiteEnv(ClusterFlags* flags, const FlagSet::EnvLookup& env) {
  if (!flags->scheduler.empty()) return absl::OkStatus();
  // ps-lite spells the scheduler's address as two variables.
  const std::string uri = LookupEnv(env, "DMLC_PS_ROOT_URI");
  const std::string port = LookupEnv(env, "DMLC_PS_ROOT_PORT");
  if (!uri.empty() && !port.empty()) {
    int p = 0;
    if (!absl::SimpleAtoi(port, &p) || p <= 0 || p > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment DMLC_PS_ROOT_PORT: expected a port, got '", port, "'"));
    }
    flags->scheduler = JoinHostPort(uri, p);
  } else if (!uri.empty() || !port.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT must be set together (only ",
                                                   uri.empty() ? "DMLC_PS_ROOT_PORT" : "DMLC_PS_ROOT_URI", " is set)"));
  }
  return absl::OkStatus();
}

// The scheduler's host ("" when there is no scheduler); checks that one is given when needed.
absl::StatusOr<std::string> SchedulerHost(const ClusterFlags& flags, bool need_scheduler) {
  if (need_scheduler && flags.scheduler.empty()) {
    return absl::InvalidArgumentError(
        "--scheduler is not set (nor DTRAIN_SCHEDULER_ADDR, nor DMLC_PS_ROOT_URI + DMLC_PS_ROOT_PORT)");
  }
  std::string scheduler_host;
  if (!flags.scheduler.empty()) {
    absl::StatusOr<HostPort> hp = SplitHostPort(flags.scheduler);
    if (!hp.ok() || hp->port == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--scheduler: ", hp.ok() ? absl::StrCat("port 0 in '", flags.scheduler, "'") : hp.status().message()));
    }
    scheduler_host = hp->host;
  }
  return scheduler_host;
}

// The job's sizes, this node's rank and port, and the timeouts.
absl::Status CheckClusterNumbers(const ClusterFlags& flags) {
  if (flags.num_workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--num-workers must be at least 1, got ", flags.num_workers));
  }
  if (flags.num_servers < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--num-servers must not be negative, got ", flags.num_servers));
  }
  // Each replica of a key range lives on another server (common/kv/replica_chain.h).
  if (flags.replication < 1 || (flags.num_servers > 0 && flags.replication > flags.num_servers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replication must be in 1..--num-servers (", flags.num_servers, "), got ", flags.replication));
  }
  if (flags.rank < -1) {
    return absl::InvalidArgumentError(absl::StrCat("--rank must be -1 (assign) or a rank, got ", flags.rank));
  }
  if (flags.port < 0 || flags.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port must be in 0..65535, got ", flags.port));
  }
  if (!(flags.register_timeout_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--register-timeout must be positive, got ", flags.register_timeout_s));
  }
  if (!(flags.rejoin_timeout_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rejoin-timeout must not be negative, got ", flags.rejoin_timeout_s));
  }
  if (flags.job_id.size() > kMaxJobIdFlagBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--job-id has ", flags.job_id.size(), " bytes, the limit is ", kMaxJobIdFlagBytes));
  }
  if (!(flags.heartbeat_interval_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heartbeat-interval must be positive, got ", flags.heartbeat_interval_s));
  }
  return absl::OkStatus();
}

// --host, else --interface's address, else the local address of the route to the scheduler,
// else loopback; host_origin says which, for the log.
absl::Status ResolveHost(ClusterFlags* flags, const std::string& scheduler_host) {
  if (!flags->host.empty()) {
    flags->host_origin = "--host";
  } else if (!flags->interface.empty()) {
    absl::StatusOr<std::string> address = InterfaceAddress(flags->interface);
    if (!address.ok()) return absl::InvalidArgumentError(absl::StrCat("--interface: ", address.status().message()));
    flags->host = *address;
    flags->host_origin = absl::StrCat("the address of interface ", flags->interface);
  } else if (!scheduler_host.empty()) {
    absl::StatusOr<std::string> address = LocalAddressToward(scheduler_host);
    if (address.ok()) {
      flags->host = *address;
      flags->host_origin = absl::StrCat("the local address of the route to the scheduler ", scheduler_host);
    } else {
      // Not fatal: the scheduler's name may resolve later (a Kubernetes service).
      flags->host = "127.0.0.1";
      flags->host_origin =
          absl::StrCat("loopback, WARNING: other machines cannot reach it; no route to the scheduler (",
                       address.status().message(), "); set --host or --interface");
    }
  } else {
    flags->host = "127.0.0.1";
    flags->host_origin = "no scheduler: loopback";
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FinishClusterFlags(ClusterFlags* flags, bool need_scheduler, const FlagSet::EnvLookup& env) {
  if (absl::Status s = SchedulerFromPsLiteEnv(flags, env); !s.ok()) return s;
  absl::StatusOr<std::string> scheduler_host = SchedulerHost(*flags, need_scheduler);
  if (!scheduler_host.ok()) return scheduler_host.status();
  if (absl::Status s = CheckClusterNumbers(*flags); !s.ok()) return s;
  return ResolveHost(flags, *scheduler_host);
}

}  // namespace dtrain
