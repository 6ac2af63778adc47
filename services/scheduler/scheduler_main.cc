// dtrain-scheduler: the rendezvous of a dtrain job. Flags and wiring only; the
// logic lives in membership.*, barrier.* and scheduler_service.*.
//
// Exits 0 once every worker finished and the servers left (or after
// --exit-grace); 1 if a node left with failed=true, every worker is gone after one
// died, or registration did not complete within --register-timeout (naming who is
// missing); on SIGTERM/SIGINT 128 + the signal while the job runs (so that an evicted
// scheduler pod is started again), else 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <fstream>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/auth/node_token.h"
#include "common/cluster_spec.h"
#include "common/credentials.h"
#include "common/flags.h"
#include "common/grpc_util.h"
#include "common/job_spec.h"
#include "common/log.h"
#include "common/net_address.h"
#include "common/port_file.h"
#include "common/shutdown_signal.h"
#include "common/tls/tls_flags.h"
#include "common/metrics/metrics_flags.h"
#include "common/metrics/registry.h"
#include "services/scheduler/scheduler_metrics.h"
#include "common/elastic/elastic_spec.h"
#include "services/scheduler/barrier.h"
#include "services/scheduler/elastic_job.h"
#include "services/scheduler/membership.h"
#include "services/scheduler/scheduler_service.h"
#include "common/defaults.h"

namespace dtrain::scheduler {
namespace {

constexpr absl::Duration kTick = absl::Milliseconds(100);

struct Flags {
  int64_t port = 0;
  std::string host = "0.0.0.0";
  std::string port_file;
  // The job's shape, mode, id and deadlines (common/job_spec.h), told to every node.
  JobSpec job;
  double heartbeat_timeout_s = kDefaultHeartbeatTimeoutSeconds;
  double exit_grace_s = 15;
  std::string cluster_spec;
  metrics::MetricsFlags metrics;
  TlsFlags tls;
  elastic::ElasticSpec elastic;
  // An elastic job's schedule is written to PREFIX-membership.json on every change.
  std::string membership_prefix = "dtrain";
};

absl::Status ParseFlags(int argc, char** argv, Flags* f, bool* help) {
  FlagSet flags("dtrain-scheduler", "Rendezvous, ranks, barriers and liveness for one dtrain job.");
  flags.AddInt("port", &f->port, "port to listen on; 0: any free one (see --port-file)",
               {"DTRAIN_PORT", "DMLC_PS_ROOT_PORT"});
  flags.AddString("host", &f->host, "address to listen on", {"DTRAIN_BIND_HOST"});
  flags.AddString("port-file", &f->port_file, "write the bound port to this file (atomically)");
  AddJobSpecFlags(flags, &f->job, NodeJobSpecFlags(dtrain::Role::kScheduler));
  flags.AddDouble("heartbeat-timeout", &f->heartbeat_timeout_s, "seconds of silence after which a node is DEAD",
                  {"DTRAIN_HEARTBEAT_TIMEOUT"});
  flags.AddDouble("exit-grace", &f->exit_grace_s, "seconds to wait for servers to leave once the job is over");
  flags.AddString("cluster-spec", &f->cluster_spec,
                  "the job's static cluster spec, ps=H:P,...;worker=H:P,... (set by dtrain run --ps_hosts ...); "
                  "nodes registering with another are refused, naming the difference",
                  {kClusterSpecEnv});
  metrics::AddMetricsFlags(flags, &f->metrics);
  AddTlsFlags(flags, &f->tls);
  elastic::AddElasticFlags(flags, &f->elastic);
  flags.AddString("membership-prefix", &f->membership_prefix,
                  "--elastic: the membership schedule is written to PREFIX-membership.json on every change (a "
                  "relative PREFIX is in the working directory), for --replay-membership",
                  {"DTRAIN_MEMBERSHIP_PREFIX"});
  absl::Status s = flags.Parse(argc, argv);
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok()) return s;
  if (f->port < 0 || f->port > 65535) return absl::InvalidArgumentError("--port must be in 0..65535");
  if (absl::Status j = CheckJobSpec(f->job, NodeJobSpecFlags(dtrain::Role::kScheduler)); !j.ok()) return j;
  if (!(f->heartbeat_timeout_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heartbeat-timeout must be positive, got ", f->heartbeat_timeout_s));
  }
  if (!(f->exit_grace_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--exit-grace must not be negative, got ", f->exit_grace_s));
  }
  if (!f->cluster_spec.empty()) {
    absl::StatusOr<ClusterSpec> spec = ParseCanonicalClusterSpec(f->cluster_spec);
    if (!spec.ok()) return absl::InvalidArgumentError(absl::StrCat("--cluster-spec: ", spec.status().message()));
  }
  if (absl::Status m = metrics::CheckMetricsFlags(f->metrics); !m.ok()) return m;
  if (absl::Status e = elastic::CheckElasticSpec(f->elastic, f->job.num_workers, f->job.mode); !e.ok()) return e;
  if (f->elastic.enabled() && f->membership_prefix.empty()) {
    return absl::InvalidArgumentError("--membership-prefix must not be empty with --elastic");
  }
  return ApplyTlsFlags(f->tls, TlsUse::kClusterNode, f->host);
}

// Ticks the service until a signal, until the job is over and every node left
// (or `exit_grace` passed since), or until registration misses its deadline.
// Returns the error that ends the job early, or OK.
absl::Status RunUntilDone(ShutdownSignal& signals, SchedulerService& service, const Membership& membership,
                          double exit_grace_s, double register_timeout_s) {
  const absl::Time register_deadline = absl::Now() + absl::Seconds(register_timeout_s);
  bool job_over = false;
  absl::Time job_over_at;
  // The first look does not wait: a signal that came during start-up ends the loop
  // before the first tick.
  for (absl::Duration wait = absl::ZeroDuration();; wait = kTick) {
    if (const std::string sig = signals.WaitFor(wait); !sig.empty()) {
      if (membership.AllRegistered() && !job_over && (sig == "SIGTERM" || sig == "SIGINT")) {
        // Stopped mid-job (a pod evicted or deleted): not a success, so that Kubernetes
        // starts the scheduler again and the nodes register with the new one.
        DTRAIN_LOG(WARNING) << "received " << sig << " while the job runs; shutting down";
        return absl::CancelledError(sig);
      }
      DTRAIN_LOG(INFO) << "received " << sig << "; shutting down";
      return absl::OkStatus();
    }
    service.Tick();
    // Nodes that never come would otherwise keep a job (and its pods) waiting forever.
    if (!membership.AllRegistered() && absl::Now() > register_deadline) {
      return absl::DeadlineExceededError(absl::StrCat("the job never started: ", membership.RegistrationText(),
                                                      " (--register-timeout ", register_timeout_s, " s)"));
    }
    std::string reason;
    if (!job_over && membership.JobOver(&reason)) {
      job_over = true;
      job_over_at = absl::Now();
      DTRAIN_LOG(INFO) << "job over (" << reason << "); telling the remaining nodes to exit";
    }
    if (job_over) {
      if (membership.AllGone()) return absl::OkStatus();
      if (absl::Now() - job_over_at > absl::Seconds(exit_grace_s)) {
        DTRAIN_LOG(WARNING) << "some nodes did not leave within " << exit_grace_s << " s; exiting anyway";
        return absl::OkStatus();
      }
    }
  }
}

// Closes the service and the server; the exit code: 128 + the signal if one stopped a
// running job (CANCELLED `early`), 1 if the job failed (`early` or a failed node), else 0.
int Shutdown(SchedulerService& service, grpc::Server& server, const Membership& membership, const absl::Status& early) {
  if (early.ok()) {
    service.Close();
  } else {
    service.Close(early);
  }
  server.Shutdown(DeadlineAfter(absl::Milliseconds(500)));
  if (absl::IsCancelled(early)) return early.message() == "SIGINT" ? 128 + SIGINT : 128 + SIGTERM;
  if (!early.ok()) {
    DTRAIN_LOG(ERROR) << "job failed: " << early.message();
    return 1;
  }
  const std::string failure = membership.Failure();
  if (!failure.empty()) {
    DTRAIN_LOG(ERROR) << "job failed: " << failure;
    return 1;
  }
  DTRAIN_LOG(INFO) << "done";
  return 0;
}

// An elastic job's coordinator (null without --elastic); reads --replay-membership.
absl::StatusOr<std::unique_ptr<ElasticJob>> MakeElasticJob(const Flags& f, SchedulerMetrics* metrics,
                                                           RollbackCoordinator* rollback) {
  if (!f.elastic.enabled()) return nullptr;
  ElasticJobOptions eo;
  eo.spec = f.elastic;
  eo.num_workers = static_cast<int>(f.job.num_workers);
  eo.num_servers = static_cast<int>(f.job.num_servers);
  eo.rejoin_timeout = absl::Seconds(f.job.rejoin_timeout_s);
  eo.membership_file = f.membership_prefix + "-membership.json";
  eo.metrics = metrics;
  eo.rollback = rollback;
  return ElasticJob::Create(std::move(eo));
}

MembershipOptions MakeMembershipOptions(const Flags& f, ElasticRanks* elastic) {
  MembershipOptions mo;
  mo.num_workers = static_cast<int>(f.job.num_workers);
  mo.num_servers = static_cast<int>(f.job.num_servers);
  mo.replication = static_cast<int>(f.job.replication);
  mo.kv_store = f.job.mode;
  mo.heartbeat_timeout = absl::Seconds(f.heartbeat_timeout_s);
  mo.job_id = f.job.job_id;
  mo.rejoin_timeout = absl::Seconds(f.job.rejoin_timeout_s);
  mo.elastic = elastic;
  return mo;
}

int Run(int argc, char** argv) {
  // First: every later thread inherits the blocked signals, and a launcher may signal
  // us as soon as it sees the port.
  ShutdownSignal signals;
  Flags f;
  bool help = false;
  if (absl::Status s = ParseFlags(argc, argv, &f, &help); !s.ok() || help) {
    if (!s.ok()) std::fprintf(stderr, "dtrain-scheduler: %s\n", std::string(s.message()).c_str());
    return s.ok() ? 0 : 2;
  }
  SetLogIdentity("scheduler", -1);
  ::signal(SIGPIPE, SIG_IGN);

  // Rank 0: one scheduler per job.
  absl::StatusOr<metrics::RoleMetrics<SchedulerMetrics>> metrics =
      metrics::StartRoleMetrics<SchedulerMetrics>(f.metrics, "scheduler", /*rank=*/0);
  if (!metrics.ok()) {
    DTRAIN_LOG(ERROR) << metrics.status().message();
    return 1;
  }
  // Servers with --snapshot-every report their snapshots; a lost shard (or an elastic
  // job's dead worker, elastic_drop.h) rolls the job back. The servers get as long to
  // reload as a worker to rejoin. With replicas a restarted server copies its ranges
  // back from a live one: no rollback. (A range that loses every replica fails the
  // job; rolling back then is not done yet, docs/recovery.md.)
  RollbackCoordinator rollback(static_cast<int>(f.job.num_servers),
                               std::max(absl::Seconds(60), absl::Seconds(f.job.rejoin_timeout_s)));
  RollbackCoordinator* const rollback_or_null = f.job.replication > 1 ? nullptr : &rollback;
  // Before anything starts: a replay file that does not parse ends here, naming it.
  absl::StatusOr<std::unique_ptr<ElasticJob>> elastic = MakeElasticJob(f, metrics->families.get(), rollback_or_null);
  if (!elastic.ok()) {
    std::fprintf(stderr, "dtrain-scheduler: %s\n", std::string(elastic.status().message()).c_str());
    return 2;
  }
  if (*elastic == nullptr && metrics->families != nullptr) {
    metrics->families->SetWorkers(static_cast<int>(f.job.num_workers));
  }
  const MembershipOptions mo = MakeMembershipOptions(f, elastic->get());
  Membership membership(mo);
  BarrierSet barriers(mo.num_workers, mo.num_servers,
                      [&membership](const NodeKey& key) { return membership.Describe(key); });
  SchedulerServiceOptions so;
  so.register_timeout = absl::Seconds(f.job.register_timeout_s);
  so.metrics = metrics->families.get();
  so.cluster_spec = f.cluster_spec;
  so.elastic = elastic->get();
  so.rollback = rollback_or_null;
  // With TLS the nodes' tokens are bound to this scheduler's key pair: a restarted
  // scheduler with the same certificate accepts the tokens it issued before.
  if (TransportIsTls()) so.token_key = auth::DeriveTokenKey(CurrentTransportSecurity().key_pem);
  SchedulerService service(&membership, &barriers, so);

  int bound_port = 0;
  std::unique_ptr<grpc::Server> server = StartGrpcServer(JoinHostPort(f.host, f.port), &service, &bound_port);
  if (server == nullptr) return 1;
  if (!f.port_file.empty()) {
    if (absl::Status s = WritePortFile(f.port_file, bound_port); !s.ok()) {
      DTRAIN_LOG(ERROR) << s.message();
      return 1;
    }
  }
  DTRAIN_LOG(INFO) << "listening on " << JoinHostPort(f.host, bound_port) << " (pid " << ::getpid() << "); expecting "
                   << f.job.num_workers << " workers and " << f.job.num_servers << " servers, kv-store "
                   << KVStoreModeName(f.job.mode)
                   << (so.elastic != nullptr ? absl::StrCat(", elastic ", so.elastic->SpecText()) : std::string());

  const absl::Status early = RunUntilDone(signals, service, membership, f.exit_grace_s, f.job.register_timeout_s);
  return Shutdown(service, *server, membership, early);
}

}  // namespace
}  // namespace dtrain::scheduler

int main(int argc, char** argv) { return dtrain::scheduler::Run(argc, argv); }
