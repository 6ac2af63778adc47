// `dtrain launch`: a whole job on this machine, the way MXNet's tools/launch.py
// --launcher local does it, but supervised: prefixed output, fail-fast, clean stop.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_flags.h"
#include "common/defaults.h"
#include "common/file_io.h"
#include "common/flags.h"
#include "common/job_id.h"
#include "common/job_spec.h"
#include "common/net_address.h"
#include "services/launcher/commands.h"
#include "services/launcher/launch_elastic.h"
#include "services/launcher/launch_tls.h"
#include "services/launcher/metrics_targets.h"
#include "services/launcher/restart_policy.h"
#include "services/launcher/supervisor.h"

namespace dtrain::launcher {
namespace {

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

constexpr absl::Duration kSchedulerStartTimeout = absl::Seconds(30);
// How long children get to report their metrics ports (a worker loads LibTorch first).
constexpr absl::Duration kMetricsPortTimeout = absl::Seconds(30);
constexpr char kLoopback[] = "127.0.0.1";
// Seconds the job waits for a dead worker's replacement under --max-restarts, unless
// --rejoin-timeout (DTRAIN_REJOIN_TIMEOUT) says otherwise.
constexpr int kRejoinTimeoutWithRestarts = 60;

// The job launch.py would start: -n is required (0: not given), -s defaults to -n
// (-1: not given).
JobSpec LaunchDefaults() {
  JobSpec job;
  job.num_workers = 0;
  job.num_servers = -1;
  return job;
}

struct LaunchFlags {
  // Workers, servers, replication and mode from the command line; the job id also from
  // DTRAIN_JOB_ID, else one made up for this launch: every child's DTRAIN_JOB_ID, the
  // same for each restart.
  JobSpec job = LaunchDefaults();
  // --elastic, --elastic-lr, --replay-membership (launch_elastic.h).
  LaunchElastic elastic;
  bool rejoin_timeout_given = false;  // --rejoin-timeout or DTRAIN_REJOIN_TIMEOUT
  std::string bin_dir;
  int64_t scheduler_port = 0;
  double stop_grace_s = kDefaultStopGraceSeconds;
  double finish_grace_s = kDefaultFinishGraceSeconds;
  int64_t metrics_base_port = -1;
  std::string metrics_file_sd;
  int64_t max_restarts = 0;
  RestartOn restart_on = RestartOn::kFailure;
  double restart_backoff_s = kDefaultRestartBackoffSeconds;
  bool tls = false;
  // Server snapshots: every N steps into snapshot_dir (default: beside the
  // workers' --model-prefix, PREFIX-snapshots/).
  int64_t snapshot_every = 0;
  std::string snapshot_dir;
  std::vector<std::string> worker_args;
};

// The value of --model-prefix among the worker flags ("" when absent).
std::string ModelPrefixOf(const std::vector<std::string>& args) {
  std::string prefix;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--model-prefix" && i + 1 < args.size()) prefix = args[i + 1];
    if (absl::StartsWith(args[i], "--model-prefix=")) prefix = args[i].substr(std::strlen("--model-prefix="));
  }
  return prefix;
}

// launch.py spells the sizes -n and -s; our flag parser knows only --long ones.
std::string ExpandShortFlag(const std::string& a) {
  for (const auto& [shorthand, name] : {std::pair{"-n", "--num-workers"}, std::pair{"-s", "--num-servers"}}) {
    if (a == shorthand) return name;
    if (absl::StartsWith(a, shorthand) && a.size() > 2) {
      return absl::StrCat(name, "=", a.substr(a[2] == '=' ? 3 : 2));
    }
  }
  return a;
}

// Declares `dtrain launch`'s own flags, in the order the usage text lists them.
void AddLaunchFlags(FlagSet& flags, LaunchFlags* f) {
  AddJobSpecFlags(flags, &f->job, LaunchJobSpecFlags());
  AddLaunchElasticFlags(flags, &f->elastic);
  flags.AddString("bin-dir", &f->bin_dir, "where dtrain-scheduler/-server/-worker are; default: next to dtrain");
  flags.AddInt("scheduler-port", &f->scheduler_port, "the scheduler's port; 0: any free one");
  flags.AddDouble("stop-grace", &f->stop_grace_s, "seconds between SIGTERM and SIGKILL when stopping");
  flags.AddDouble("finish-grace", &f->finish_grace_s,
                  "seconds the scheduler and servers get to exit after the workers finished");
  flags.AddInt("metrics-base-port", &f->metrics_base_port,
               "Prometheus endpoints: -1 off; 0 any free ports; N: scheduler N, server i N+1+i, worker i N+1+S+i");
  flags.AddString("metrics-file-sd", &f->metrics_file_sd,
                  "write the endpoints as a Prometheus file_sd target list here (turns metrics on)");
  flags.AddInt("max-restarts", &f->max_restarts,
               "restart a failed worker or scheduler up to N times each, with its rank and port (torchrun's "
               "name); 0: a failure ends the job. A failed server ends it unless --replication > 1 (its ranges live "
               "on) or --snapshot-every is set (the job rolls back to the snapshots). The others wait up to "
               "--rejoin-timeout seconds (default 60 with restarts) for the replacement");
  AddParsedValue(flags, "restart-on", &f->restart_on, ParseRestartOn, RestartOnName(f->restart_on),
                 "what --max-restarts restarts: 'failure' (any non-zero exit) or 'signal' (only a death by a "
                 "signal, e.g. SIGKILL by the OOM killer)");
  flags.AddDouble("restart-backoff", &f->restart_backoff_s,
                  "seconds before a child's first restart, doubled for each further one (at most 30)");
  flags.AddBool("tls", &f->tls,
                "mutual TLS between every process of the job, with a throwaway CA and a certificate per process "
                "made for this run (removed at exit)");
  flags.AddInt("snapshot-every", &f->snapshot_every,
               "servers write their shard every N steps (dist_sync; the newest two kept); a server that dies is "
               "restarted (--max-restarts) and the job rolls back to the newest step every server has; 0: off");
  flags.AddString("snapshot-dir", &f->snapshot_dir,
                  "where the servers' snapshots go; default: PREFIX-snapshots beside the workers' --model-prefix");
}

// Everything after "--" goes to the workers (into f->worker_args); returns our own
// arguments, short flags expanded.
std::vector<std::string> SplitWorkerArgs(const std::vector<std::string>& args, LaunchFlags* f) {
  std::vector<std::string> own;
  bool passthrough = false;
  for (const auto& a : args) {
    if (passthrough) {
      f->worker_args.push_back(a);
    } else if (a == "--") {
      passthrough = true;
    } else {
      own.push_back(ExpandShortFlag(a));
    }
  }
  return own;
}

// Checks the job's shape (workers, servers, replication) and defaults -s to -n.
absl::Status CheckJobShape(JobSpec* job) {
  if (job->num_workers < 1) return absl::InvalidArgumentError("-n (the number of workers) must be at least 1");
  const bool dist = IsDistributed(job->mode);
  if (!dist && job->num_workers != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-store ", KVStoreModeName(job->mode),
                                                   " trains in one worker process; use -n 1, or a dist_* "
                                                   "kv-store for ",
                                                   job->num_workers, " workers"));
  }
  if (job->num_servers < 0) job->num_servers = job->num_workers;
  if (dist && job->num_servers < 1) {
    return absl::InvalidArgumentError("a dist kv-store needs at least one server (-s)");
  }
  if (job->replication < 1 || (dist && job->replication > job->num_servers) || (!dist && job->replication != 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--replication must be in 1..", dist ? job->num_servers : 1,
                                                   " (each copy lives on another server), got ", job->replication));
  }
  return absl::OkStatus();
}

// Checks the ports and the restart flags; metrics-file-sd turns metrics on.
absl::Status CheckPortsAndRestarts(LaunchFlags* f) {
  if (f->scheduler_port < 0 || f->scheduler_port > 65535) {
    return absl::InvalidArgumentError("--scheduler-port must be in 0..65535");
  }
  if (f->metrics_base_port < -1 || f->metrics_base_port > 65535) {
    return absl::InvalidArgumentError("--metrics-base-port must be -1 (off), 0 (any free ports) or a port");
  }
  if (f->metrics_base_port == -1 && !f->metrics_file_sd.empty()) f->metrics_base_port = 0;
  if (f->max_restarts < 0 || f->max_restarts > 1000) {
    return absl::InvalidArgumentError("--max-restarts must be in 0..1000");
  }
  if (!(f->restart_backoff_s >= 0 && f->restart_backoff_s <= 3600)) {
    return absl::InvalidArgumentError("--restart-backoff must be in 0..3600 seconds");
  }
  return absl::OkStatus();
}

// Fills the defaults that depend on other flags or the environment (snapshot
// directory, bin dir, job id) and checks them.
absl::Status ResolveDefaults(LaunchFlags* f) {
  if (f->snapshot_every < 0) return absl::InvalidArgumentError("--snapshot-every must be >= 0");
  if (f->snapshot_every > 0 && f->snapshot_dir.empty()) {
    // Servers do not know the model prefix: the directory is computed here.
    const std::string prefix = ModelPrefixOf(f->worker_args);
    if (prefix.empty()) {
      return absl::InvalidArgumentError(
          "--snapshot-every needs --snapshot-dir, or a --model-prefix among the worker flags (the snapshots go "
          "beside it)");
    }
    f->snapshot_dir = prefix + "-snapshots";
  }
  if (f->bin_dir.empty()) f->bin_dir = SelfDir();
  if (f->job.job_id.empty()) f->job.job_id = NewJobId();
  return CheckJobSpec(f->job, LaunchJobSpecFlags());
}

// Parses and checks; `*help`: usage was printed.
absl::Status ParseFlags(const std::vector<std::string>& args, LaunchFlags* f, bool* help) {
  FlagSet flags("dtrain launch",
                "Starts a scheduler, S parameter servers and W workers on this machine (loopback) and\n"
                "supervises them. Usage: dtrain launch -n W [-s S] [--elastic MIN:MAX] [flags] -- WORKER-FLAGS\n"
                "With --kv-store local or device, runs one worker process alone.");
  // Only --job-id reads the environment (DTRAIN_JOB_ID): see LaunchJobSpecFlags.
  AddLaunchFlags(flags, f);
  absl::Status s = flags.Parse(SplitWorkerArgs(args, f));
  f->rejoin_timeout_given = flags.WasSet("rejoin-timeout");
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok() || *help) return s;
  if (s = CheckJobShape(&f->job); !s.ok()) return s;
  if (s = ResolveElasticResume(f->worker_args, f->job.num_workers, &f->elastic); !s.ok()) return s;
  if (s = CheckLaunchElastic(f->elastic, f->job.num_workers, f->job.mode); !s.ok()) return s;
  if (s = CheckPortsAndRestarts(f); !s.ok()) return s;
  return ResolveDefaults(f);
}

// A private directory for the port files, removed on every path out.
class TempDir {
 public:
  TempDir() {
    // TMPDIR is the system's convention for where temporary files go, not a dtrain
    // setting, so it has no flag: read as every mkdtemp user reads it.
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/dtrain-launch-XXXXXX");
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int ReadPort(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  int port = 0;
  if (!(in >> text) || !absl::SimpleAtoi(text, &port)) return 0;
  return port;
}

ChildSpec SchedulerSpec(const LaunchFlags& f, int port, const std::string& port_file,
                        const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> args = {"--host",        kLoopback,
                                   "--port",        std::to_string(port),
                                   "--port-file",   port_file,
                                   "--num-workers", std::to_string(f.job.num_workers),
                                   "--num-servers", std::to_string(f.job.num_servers),
                                   "--kv-store",    KVStoreModeName(f.job.mode)};
  for (std::string& a : SchedulerElasticArgs(f.elastic)) args.push_back(std::move(a));
  return ChildSpec{"scheduler", f.bin_dir + "/dtrain-scheduler", std::move(args), env};
}

// Starts the scheduler and waits for its port file; returns the port, or 0 after
// reporting why not (having stopped everything). A restart of the scheduler asks
// for the port it got, explicitly: every node knows it by that address.
int StartScheduler(Supervisor& sup, const LaunchFlags& f, const std::string& port_file,
                   const std::vector<std::pair<std::string, std::string>>& env) {
  if (absl::Status s = sup.Start(Role::kScheduler, SchedulerSpec(f, f.scheduler_port, port_file, env)); !s.ok()) {
    sup.Message(absl::StrCat("cannot start the scheduler: ", s.message()));
    return 0;
  }
  const absl::Time deadline = absl::Now() + kSchedulerStartTimeout;
  while (g_signal == 0) {
    sup.Pump(absl::Milliseconds(50));
    if (::access(port_file.c_str(), R_OK) == 0) {
      const int port = ReadPort(port_file);
      if (port != 0) (void)sup.SetRestartSpec(Role::kScheduler, 0, SchedulerSpec(f, port, port_file, env));
      return port;
    }
    const Child* scheduler = sup.Find(Role::kScheduler, 0);
    if (scheduler->exited()) {
      sup.Message(absl::StrCat("the scheduler ", scheduler->DescribeExit(), " before it was ready"));
      return 0;
    }
    if (absl::Now() > deadline) {
      sup.Message(
          absl::StrCat("the scheduler did not report its port within ", absl::FormatDuration(kSchedulerStartTimeout)));
      sup.StopAll();
      return 0;
    }
  }
  return 0;
}

// Waits (bounded) for every child's metrics port, prints the addresses, and writes the
// file_sd list. A child that fails meanwhile is left to Supervisor::Run to report.
void AnnounceMetrics(Supervisor& sup, MetricsTargets& metrics, const std::string& file_sd) {
  const absl::Time deadline = absl::Now() + kMetricsPortTimeout;
  while (!metrics.Collect() && g_signal == 0 && sup.Failed() == nullptr) {
    if (absl::Now() > deadline) {
      sup.Message(absl::StrCat("metrics: no port reported within ", absl::FormatDuration(kMetricsPortTimeout), " by ",
                               metrics.MissingText()));
      break;
    }
    sup.Pump(absl::Milliseconds(50));
  }
  for (const MetricsTarget& t : metrics.targets()) {
    if (t.port == 0) continue;
    sup.Message(absl::StrCat("metrics: ", t.name(), " at http://", JoinHostPort(kLoopback, t.port), "/metrics"));
  }
  if (file_sd.empty()) return;
  if (absl::Status s = WriteFileAtomically(file_sd, metrics.FileSd(kLoopback)); !s.ok()) {
    sup.Message(absl::StrCat("metrics: ", s.message()));
  } else {
    sup.Message(absl::StrCat("metrics: Prometheus targets written to ", file_sd));
  }
}

// With snapshots a dead server is restarted, and the workers reconnect to the address
// they know it by: its restart asks for the port it got (as the scheduler's does).
// Waits (bounded) for each server's port file.
bool PinServerPorts(Supervisor& sup, const std::string& tmp, std::vector<ChildSpec> specs) {
  const absl::Time deadline = absl::Now() + kSchedulerStartTimeout;
  for (int i = 0; i < static_cast<int>(specs.size()); ++i) {
    const std::string port_file = absl::StrCat(tmp, "/server-", i, ".port");
    int port = 0;
    while (g_signal == 0 && (port = ReadPort(port_file)) == 0) {
      if (absl::Now() > deadline) {
        sup.Message(absl::StrCat("server ", i, " did not report its port within ",
                                 absl::FormatDuration(kSchedulerStartTimeout)));
        return false;
      }
      if (const Child* c = sup.Find(Role::kServer, i); c != nullptr && c->exited()) {
        sup.Message(absl::StrCat("server ", i, " ", c->DescribeExit(), " before it was ready"));
        return false;
      }
      sup.Pump(absl::Milliseconds(50));
    }
    if (port == 0) return false;
    specs[i].args.push_back("--port");
    specs[i].args.push_back(std::to_string(port));
    (void)sup.SetRestartSpec(Role::kServer, i, std::move(specs[i]));
  }
  return true;
}

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Checks that the binaries this job runs exist before anything starts; reports the first missing one.
bool FindBinaries(const LaunchFlags& f, bool dist) {
  for (const char* bin : {"dtrain-scheduler", "dtrain-server", "dtrain-worker"}) {
    if (!dist && std::string(bin) != "dtrain-worker") continue;
    const std::string path = f.bin_dir + "/" + bin;
    if (::access(path.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "dtrain launch: cannot find %s in %s (build it, or pass --bin-dir)\n", bin,
                   f.bin_dir.c_str());
      return false;
    }
  }
  return true;
}

// SIGINT/SIGTERM stop the job cleanly (the supervisor polls g_signal); SIGPIPE is ignored.
void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;  // no SA_RESTART: poll returns at once
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

SupervisorOptions MakeSupervisorOptions(const LaunchFlags& f) {
  SupervisorOptions options;
  options.stop_grace = absl::Seconds(f.stop_grace_s);
  options.finish_grace = absl::Seconds(f.finish_grace_s);
  options.pending_signal = [] { return static_cast<int>(g_signal); };
  options.restart = RestartPolicy{static_cast<int>(f.max_restarts), f.restart_on, absl::Seconds(f.restart_backoff_s)};
  // A replicated server's ranges live on (its replacement starts empty beside them);
  // with snapshots the job rolls back. Otherwise a new server would hold nothing.
  options.restart_servers = f.job.replication > 1 || f.snapshot_every > 0;
  options.workers_may_leave = f.elastic.spec.enabled();
  return options;
}

// The environment every child of the job shares.
EnvList JobEnv(const LaunchFlags& f, int servers) {
  EnvList env = {
      {"DTRAIN_NUM_WORKERS", std::to_string(f.job.num_workers)},
      {"DTRAIN_NUM_SERVERS", std::to_string(servers)},
      {"DTRAIN_REPLICATION", std::to_string(f.job.replication)},
      {"DTRAIN_NODE_HOST", kLoopback},
      // One machine: the servers listen on loopback only, as the scheduler does, rather
      // than on every interface of a machine that may have public ones.
      {"DTRAIN_BIND_HOST", kLoopback},
      {"DTRAIN_LOG_IDENTITY", "0"},  // we prefix every line ourselves
      {"DTRAIN_LOCAL_WORKERS", std::to_string(f.job.num_workers)},
      // One id for every process and every restart: a process restarted at the moment
      // the scheduler is can never bring the job another id (docs/recovery.md).
      {"DTRAIN_JOB_ID", f.job.job_id},
      ElasticEnv(f.elastic.spec),
  };
  if (f.rejoin_timeout_given) {
    env.emplace_back("DTRAIN_REJOIN_TIMEOUT", absl::StrCat(f.job.rejoin_timeout_s));
  } else if (f.max_restarts > 0) {
    // A restarted worker needs the others to wait for it rather than fail at its death
    // (docs/recovery.md); a minute covers a restart's backoff and start-up many times over.
    env.emplace_back("DTRAIN_REJOIN_TIMEOUT", std::to_string(kRejoinTimeoutWithRestarts));
  }
  return env;
}

// With --tls, makes the job's certificates under `dir`; false after reporting why not.
bool MakeTls(const LaunchFlags& f, Supervisor& sup, const std::string& dir, int servers,
             std::optional<LaunchTls>* tls) {
  // An elastic job's ranks go up to MAX: a worker joining by hand takes the
  // certificate of the rank it asks for (README.md, "Elastic workers").
  const int64_t ranks = f.elastic.spec.enabled() ? f.elastic.spec.max_workers : f.job.num_workers;
  absl::StatusOr<LaunchTls> made = LaunchTls::Create(dir, "local", servers, static_cast<int>(ranks));
  if (!made.ok()) {
    sup.Message(absl::StrCat("--tls: cannot make the job's certificates: ", made.status().message()));
    return false;
  }
  *tls = *std::move(made);
  sup.Message(
      absl::StrCat("mutual TLS on every connection (a throwaway CA for this run); an operator "
                   "certificate for dtrain status while it runs: ",
                   (*tls)->dir(), "/operator.{crt,key}"));
  return true;
}

// What starting the job's children needs. `env` is what every child shares; it grows
// the scheduler's address once the scheduler is up.
struct Job {
  const LaunchFlags& f;
  Supervisor& sup;
  MetricsTargets& metrics;
  const std::optional<LaunchTls>& tls;
  std::string tmp;  // the port files' directory
  int servers;
  EnvList env;
  std::vector<ChildSpec> server_specs;  // as started, for PinServerPorts

  // `e` plus one child's own environment: its metrics port file and its certificate.
  EnvList WithChildEnv(EnvList e, Role role, int rank) const {
    for (auto& kv : metrics.EnvFor(role, rank)) e.push_back(std::move(kv));
    if (tls.has_value()) {
      for (auto& kv : tls->EnvFor(role, rank)) e.push_back(std::move(kv));
    }
    return e;
  }

  // Starts server or worker `rank`; false after reporting why not.
  bool StartChild(Role kind, int rank, std::vector<std::string> args) {
    const std::string role = RoleName(kind);
    auto child_env = WithChildEnv(env, kind, rank);
    child_env.emplace_back("DTRAIN_RANK", std::to_string(rank));
    ChildSpec spec{absl::StrCat(role, " ", rank), absl::StrCat(f.bin_dir, "/dtrain-", role), std::move(args),
                   std::move(child_env)};
    if (kind == Role::kServer) server_specs.push_back(spec);
    absl::Status s = sup.Start(kind, spec);
    if (!s.ok()) sup.Message(absl::StrCat("cannot start ", spec.name, ": ", s.message()));
    return s.ok();
  }
};

// Starts the scheduler and adds its address to the job's environment; an exit code
// when the launch must end (everything stopped).
std::optional<int> StartJobScheduler(Job& job) {
  const int port =
      StartScheduler(job.sup, job.f, job.tmp + "/scheduler.port", job.WithChildEnv(job.env, Role::kScheduler, 0));
  if (g_signal != 0) {
    job.sup.StopAll();
    return 128 + g_signal;
  }
  if (port == 0) {
    job.sup.StopAll();
    return 1;
  }
  const std::string address = JoinHostPort(kLoopback, port);
  job.sup.Message(absl::StrCat("scheduler at ", address, "; starting ", job.servers, " servers and ",
                               job.f.job.num_workers, " workers (kv-store ", KVStoreModeName(job.f.job.mode), ", job ",
                               job.f.job.job_id, ElasticSummary(job.f.elastic.spec), ")"));
  job.env.emplace_back("DTRAIN_SCHEDULER_ADDR", address);
  const std::string tls_dir = job.tls.has_value() ? job.tls->dir() : "";
  for (const std::string& line : JoinInstructions(job.f.elastic.spec, job.env, job.f.bin_dir + "/dtrain-worker",
                                                  job.f.job.mode, job.f.worker_args, tls_dir)) {
    job.sup.Message(line);
  }
  job.env.emplace_back("DTRAIN_PORT", "0");  // never a port inherited from our environment: servers would collide
  return std::nullopt;
}

// Starts the servers (with snapshots: and pins their ports); an exit code when the
// launch must end (everything stopped).
std::optional<int> StartServers(Job& job) {
  const LaunchFlags& f = job.f;
  for (int i = 0; i < job.servers; ++i) {
    std::vector<std::string> args;
    if (f.snapshot_every > 0) {
      args = {"--snapshot-every", std::to_string(f.snapshot_every),
              "--snapshot-dir",   f.snapshot_dir,
              "--port-file",      absl::StrCat(job.tmp, "/server-", i, ".port")};
    }
    if (!job.StartChild(Role::kServer, i, args)) {
      job.sup.StopAll();
      return 1;
    }
  }
  if (f.snapshot_every > 0 && !PinServerPorts(job.sup, job.tmp, job.server_specs)) {
    job.sup.StopAll();
    return g_signal != 0 ? 128 + g_signal : 1;
  }
  return std::nullopt;
}

// Starts the workers with the worker flags; an exit code when the launch must end.
std::optional<int> StartWorkers(Job& job) {
  for (int i = 0; i < job.f.job.num_workers; ++i) {
    std::vector<std::string> args = {"--kv-store", KVStoreModeName(job.f.job.mode)};
    args.insert(args.end(), job.f.worker_args.begin(), job.f.worker_args.end());
    if (!job.StartChild(Role::kWorker, i, std::move(args))) {
      job.sup.StopAll();
      return 1;
    }
  }
  return std::nullopt;
}

int Launch(const LaunchFlags& f) {
  const bool dist = IsDistributed(f.job.mode);
  if (!FindBinaries(f, dist)) return 1;
  InstallSignalHandlers();
  Supervisor sup(MakeSupervisorOptions(f));
  const int servers = dist ? static_cast<int>(f.job.num_servers) : 0;
  EnvList env = JobEnv(f, servers);
  TempDir tmp;
  if (tmp.path().empty()) {
    sup.Message("cannot create a temporary directory for the port files");
    return 1;
  }
  MetricsTargets metrics(f.metrics_base_port, tmp.path(), dist, servers, static_cast<int>(f.job.num_workers));
  std::optional<LaunchTls> tls;
  if (f.tls && !MakeTls(f, sup, tmp.path(), servers, &tls)) return 1;
  Job job{f, sup, metrics, tls, tmp.path(), servers, std::move(env), {}};
  if (dist) {
    if (std::optional<int> code = StartJobScheduler(job)) return *code;
  }
  if (std::optional<int> code = StartServers(job)) return *code;
  if (std::optional<int> code = StartWorkers(job)) return *code;
  // Everything started: a failure from now on is one a restart may cure.
  sup.AllowRestarts();
  if (f.max_restarts > 0) {
    sup.Message(absl::StrCat("restarting a failed worker", f.job.replication > 1 ? ", server" : "",
                             " or scheduler up to ", f.max_restarts, f.max_restarts == 1 ? " time" : " times",
                             " each (--restart-on ", RestartOnName(f.restart_on), ")"));
  }
  if (metrics.enabled()) AnnounceMetrics(sup, metrics, f.metrics_file_sd);
  const int code = sup.Run();
  if (code == 0 && f.elastic.spec.enabled()) {
    sup.Message(absl::StrCat("the scheduler ended the job; the ", f.job.num_workers, " workers started here are done"));
  } else if (code == 0) {
    sup.Message(absl::StrCat("all ", f.job.num_workers, " workers finished"));
  }
  return code;
}

}  // namespace

int LaunchCommand(const std::vector<std::string>& args) {
  LaunchFlags f;
  bool help = false;
  absl::Status s = ParseFlags(args, &f, &help);
  if (!s.ok()) {
    std::fprintf(stderr, "dtrain launch: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (help) return 0;
  return Launch(f);
}

}  // namespace dtrain::launcher
