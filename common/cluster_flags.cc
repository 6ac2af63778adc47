#include "common/cluster_flags.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/net_address.h"
#include "common/socket_tuning.h"

namespace dtrain {

void AddClusterFlags(FlagSet& flags, ClusterFlags* out, Role role) {
  flags.AddString("scheduler", &out->scheduler, "host:port of the scheduler (else DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT)",
                  {"DTRAIN_SCHEDULER_ADDR"});
  AddJobSpecFlags(flags, &out->job, NodeJobSpecFlags(role));
  std::vector<std::string> rank_env = {"DTRAIN_RANK"};
  if (role == Role::kWorker) rank_env.push_back("DMLC_WORKER_ID");
  if (role == Role::kServer) rank_env.push_back("DMLC_SERVER_ID");
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
  flags.AddDouble("heartbeat-interval", &out->heartbeat_interval_s, "seconds between heartbeats to the scheduler",
                  {"DTRAIN_HEARTBEAT_INTERVAL"});
  flags.AddString("tcp-congestion", &out->tcp_congestion,
                  "TCP congestion control of this node's connections, e.g. reno (one the kernel allows: "
                  "net.ipv4.tcp_allowed_congestion_control); empty: the system's. On hosts running bbr, reno "
                  "ran 4 workers and 4 servers 1.26x faster on shared 250 Mbit/s links (docs/tuning.md)",
                  {"DTRAIN_TCP_CONGESTION"});
  flags.AddString("cluster-spec", &out->cluster_spec,
                  "the job's static cluster spec, ps=H:P,...;worker=H:P,... (set by dtrain run --ps_hosts ...); "
                  "sent when registering, so that the scheduler refuses a node told another cluster",
                  {kClusterSpecEnv});
  AddTlsFlags(flags, &out->tls);
}

namespace {

// An environment variable through `env` (the process environment when `env` is empty); "" when unset.
// Read here, not through a FlagSet binding: ps-lite spells one setting (--scheduler)
// as two variables, and a binding gives one flag one variable.
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

// This node's rank, port and heartbeat (the job's settings are CheckJobSpec's).
absl::Status CheckNodeNumbers(const ClusterFlags& flags) {
  if (flags.rank < -1) {
    return absl::InvalidArgumentError(absl::StrCat("--rank must be -1 (assign) or a rank, got ", flags.rank));
  }
  if (flags.port < 0 || flags.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--port must be in 0..65535, got ", flags.port));
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

absl::Status FinishClusterFlags(ClusterFlags* flags, Role role, bool need_scheduler, const FlagSet::EnvLookup& env) {
  if (absl::Status s = SchedulerFromPsLiteEnv(flags, env); !s.ok()) return s;
  absl::StatusOr<std::string> scheduler_host = SchedulerHost(*flags, need_scheduler);
  if (!scheduler_host.ok()) return scheduler_host.status();
  if (absl::Status s = CheckJobSpec(flags->job, NodeJobSpecFlags(role)); !s.ok()) return s;
  if (absl::Status s = CheckNodeNumbers(*flags); !s.ok()) return s;
  if (absl::Status s = SetTcpCongestion(flags->tcp_congestion); !s.ok()) return s;
  return ResolveHost(flags, *scheduler_host);
}

}  // namespace dtrain
