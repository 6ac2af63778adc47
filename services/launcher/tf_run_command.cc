// `dtrain run` with a TensorFlow 1 style cluster spec: the command a seed
// user typed on each machine, with dtrain in place of the script,
//   dtrain run --ps_hosts=h1:2222 --worker_hosts=h2:2222,h3:2222 --job_name=worker --task_index=0
//       -- --network lenet --num-epochs 1
// or the same spec in TF_CONFIG. Every node derives its role, rank, the job's size and
// the scheduler's address from its own copy of the spec; worker 0 (the chief) also runs
// the scheduler, supervised beside its worker. Other nodes become their role's binary.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/defaults.h"
#include "common/kvstore_mode.h"
#include "common/job_id.h"
#include "common/job_spec.h"
#include "common/flags.h"
#include "common/net_address.h"
#include "services/launcher/commands.h"
#include "services/launcher/launch_elastic.h"
#include "services/launcher/supervisor.h"
#include "services/launcher/tf_cluster_spec.h"
#include "services/launcher/tf_host_check.h"

namespace dtrain::launcher {
namespace {

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

// `dtrain run`'s own flags in this mode, '-' or '_' spelled (FlagSet treats them alike).
constexpr const char* kTfFlagNames[] = {"ps-hosts", "worker-hosts", "job-name", "task-index", "scheduler-port"};

// `dtrain run`'s job settings in this mode: the size comes from the spec, the job id
// from --job-id or DTRAIN_JOB_ID, else from the spec too.
constexpr JobSpecFlags kTfRunJobSpecFlags{kJobId, kJobId, std::nullopt};

struct TfRunFlags {
  TfFlags tf;
  JobSpec job;
  // --elastic (MIN..MAX around the spec's worker count), --elastic-lr, --replay-membership.
  LaunchElastic elastic;
  int64_t scheduler_port = 0;
  std::string bin_dir;
  std::vector<std::string> worker_args;  // after `--`
};

// "--task_index=1" -> "task-index"; "" for what is not a flag.
std::string FlagNameOf(const std::string& arg) {
  if (!absl::StartsWith(arg, "-") || arg == "-" || arg == "--") return "";
  std::string name = arg.substr(arg.find_first_not_of('-'));
  name = name.substr(0, name.find('='));
  for (char& c : name) {
    if (c == '_') c = '-';
  }
  return name;
}

// The value of --kv-store among the worker flags ("" when absent).
std::string KvStoreOf(const std::vector<std::string>& args) {
  std::string value;
  for (size_t i = 0; i < args.size(); ++i) {
    if (FlagNameOf(args[i]) != "kv-store") continue;
    const size_t eq = args[i].find('=');
    if (eq != std::string::npos) {
      value = args[i].substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[i + 1];
    }
  }
  return value;
}

absl::Status ParseTfRunFlags(const std::vector<std::string>& args, TfRunFlags* f, bool* help) {
  FlagSet flags("dtrain run",
                "A TensorFlow 1 style task: the same spec on every machine, this machine's task named.\n"
                "Usage: dtrain run --ps_hosts=H:P,... --worker_hosts=H:P,... --job_name=ps|worker --task_index=N "
                "[-- WORKER-FLAGS]\n"
                "   or: TF_CONFIG='{\"cluster\": {...}, \"task\": {...}}' dtrain run [-- WORKER-FLAGS]\n"
                "ps i is server rank i, listening at its host:port; worker i is worker rank i (a TF_CONFIG chief is "
                "worker 0). Worker 0 also runs the scheduler, at its listed host:port (or --scheduler_port). The "
                "flags after -- go to the workers (default --kv-store dist_sync).");
  flags.AddString("ps-hosts", &f->tf.ps_hosts, "the parameter servers, host:port,... (IPv6 as [addr]:port)");
  flags.AddString("worker-hosts", &f->tf.worker_hosts, "the workers, host:port,...; the first hosts the scheduler");
  flags.AddString("job-name", &f->tf.job_name, "this task's job: ps or worker");
  flags.AddInt("task-index", &f->tf.task_index, "this task's position in its job's list (0-based)");
  flags.AddInt("scheduler-port", &f->scheduler_port,
               "the scheduler's port on worker 0's host; 0: worker 0's listed port (every node must agree)");
  flags.AddString("bin-dir", &f->bin_dir, "where dtrain-scheduler/-server/-worker are; default: next to dtrain");
  // The spec is the command line (or TF_CONFIG): no DTRAIN_* variable changes it, but
  // DTRAIN_JOB_ID names the job.
  AddJobSpecFlags(flags, &f->job, kTfRunJobSpecFlags);
  // Every task must be given the same --elastic (the scheduler refuses a node whose
  // differs); from the command line only, as the spec.
  AddLaunchElasticFlags(flags, &f->elastic);
  std::vector<std::string> own;
  bool passthrough = false;
  for (const auto& a : args) {
    if (passthrough) {
      f->worker_args.push_back(a);
    } else if (a == "--") {
      passthrough = true;
    } else {
      own.push_back(a);
    }
  }
  absl::Status s = flags.Parse(own);
  *help = flags.help_requested();
  if (*help) std::fputs(flags.Usage().c_str(), stdout);
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.message(), " (a task's training flags go after --: dtrain run --ps_hosts=... -- --network lenet)"));
  }
  if (*help) return s;
  if (f->scheduler_port < 0 || f->scheduler_port > 65535) {
    return absl::InvalidArgumentError("--scheduler_port must be in 0..65535");
  }
  if (f->bin_dir.empty()) f->bin_dir = SelfDir();
  return CheckJobSpec(f->job, kTfRunJobSpecFlags);
}

absl::StatusOr<TfClusterLaunch> LoadSpec(const TfRunFlags& f, std::vector<std::string>* notes) {
  // TensorFlow's own variable, read as IsTfClusterRun reads it (which must, before any
  // flag is parsed, to pick this command at all): the alternative to the flags, not a
  // flag's environment name.
  const char* tf_config = std::getenv("TF_CONFIG");
  const bool has_flags =
      !f.tf.ps_hosts.empty() || !f.tf.worker_hosts.empty() || !f.tf.job_name.empty() || f.tf.task_index != -1;
  if (has_flags || tf_config == nullptr || *tf_config == '\0') {
    if (tf_config != nullptr && *tf_config != '\0') {
      notes->push_back("TF_CONFIG is ignored: the --ps_hosts/--worker_hosts flags were given");
    }
    return FromTfFlags(f.tf);
  }
  return FromTfConfig(tf_config);
}

void Say(const std::string& text) { std::fprintf(stderr, "dtrain run: %s\n", text.c_str()); }

// The workers' kv-store, added to `worker_args` when they name none, checked with the
// elastic settings against the spec's `workers`: INVALID_ARGUMENT saying why not.
absl::StatusOr<std::string> WorkersKvStore(const TfRunFlags& f, size_t workers, std::vector<std::string>* worker_args) {
  // What the workers train with unless their flags say otherwise: bit-identical workers,
  // as `dtrain launch` (TF1's between-graph replicas were asynchronous unless wrapped in
  // SyncReplicasOptimizer; --kv-store dist_async is that).
  std::string kv_store = KvStoreOf(*worker_args);
  if (kv_store.empty()) {
    kv_store = KVStoreModeName(kDefaultJobMode);
    worker_args->insert(worker_args->begin(), {"--kv-store", kv_store});
  }
  absl::StatusOr<KVStoreMode> mode = ParseKVStoreMode(kv_store);
  if (!mode.ok() || !IsDistributed(*mode)) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-store ", kv_store,
                                                   mode.ok() ? " trains in one process; a cluster spec needs a dist_* "
                                                               "kv-store (dist_sync, dist_async, dist_ssp)"
                                                             : absl::StrCat(": ", mode.status().message())));
  }
  if (absl::Status s = CheckLaunchElastic(f.elastic, static_cast<int64_t>(workers), *mode); !s.ok()) {
    // The spec's worker count stands for -n here.
    const bool about_count = absl::StartsWith(s.message(), "--num-workers");
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(), about_count ? absl::StrCat(" (the ", workers, " workers the spec lists)") : ""));
  }
  return kv_store;
}

using Env = std::vector<std::pair<std::string, std::string>>;

// Worker 0 (the chief): the scheduler and the worker, supervised as `dtrain launch`
// does: prefixed output, the first failure stops the other, nothing left behind.
int RunWithScheduler(const TfRunFlags& f, const std::string& scheduler_address, const Env& env,
                     const std::vector<std::string>& worker_args, const std::string& kv_store) {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;  // no SA_RESTART: poll returns at once
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  SupervisorOptions options;
  options.pending_signal = [] { return static_cast<int>(g_signal); };
  options.message_prefix = "dtrain run: ";
  // Worker 0 may leave an elastic job while the others train on: the scheduler beside
  // it then runs until it ends the job.
  options.workers_may_leave = f.elastic.spec.enabled();
  Supervisor sup(options);
  absl::StatusOr<HostPort> listen = SplitHostPort(scheduler_address);  // checked when parsed
  Env scheduler_env = env;
  scheduler_env.emplace_back("DTRAIN_LOG_IDENTITY", "0");  // we prefix every line ourselves
  std::vector<std::string> scheduler_args = {"--port", std::to_string(listen.ok() ? listen->port : 0), "--kv-store",
                                             kv_store};
  for (std::string& a : SchedulerElasticArgs(f.elastic)) scheduler_args.push_back(std::move(a));
  const ChildSpec scheduler{"scheduler", f.bin_dir + "/dtrain-scheduler", std::move(scheduler_args), scheduler_env};
  Env worker_env = scheduler_env;
  worker_env.emplace_back("DTRAIN_RANK", "0");
  const ChildSpec worker{"worker 0", f.bin_dir + "/dtrain-worker", worker_args, worker_env};
  for (const auto& [kind, spec] : {std::pair{Role::kScheduler, &scheduler}, std::pair{Role::kWorker, &worker}}) {
    if (absl::Status s = sup.Start(kind, *spec); !s.ok()) {
      sup.Message(absl::StrCat("cannot start ", spec->name, ": ", s.message()));
      sup.StopAll();
      return 1;
    }
  }
  return sup.Run();
}

// Other nodes: this process becomes the role's binary, with the cluster in its
// environment (DTRAIN_* names override DMLC_* ones there).
int ExecTask(const std::string& bin_dir, const std::string& role, const Env& env,
             const std::vector<std::string>& args) {
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  const std::string path = absl::StrCat(bin_dir, "/dtrain-", role);
  std::vector<std::string> storage{path};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stderr);
  ::execv(path.c_str(), argv.data());
  Say(absl::StrCat("cannot run ", path, ": ", std::strerror(errno)));
  return 127;
}

}  // namespace

bool IsTfClusterRun(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") break;
    const std::string name = FlagNameOf(a);
    for (const char* tf : kTfFlagNames) {
      if (name == tf) return true;
    }
  }
  // TF_CONFIG alone: only when no dtrain role is named (a pod may carry both). Read
  // before any FlagSet, as `dtrain run` picks the command (and so the flags) from them.
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
  };
  return set("TF_CONFIG") && !set("DTRAIN_ROLE") && !set("DMLC_ROLE");
}

int TfRunCommand(const std::vector<std::string>& args) {
  TfRunFlags f;
  bool help = false;
  if (absl::Status s = ParseTfRunFlags(args, &f, &help); !s.ok() || help) {
    if (!s.ok()) Say(std::string(s.message()));
    return s.ok() ? 0 : 2;
  }
  std::vector<std::string> notes;
  absl::StatusOr<TfClusterLaunch> launch = LoadSpec(f, &notes);
  if (!launch.ok()) {
    Say(std::string(launch.status().message()));
    return 2;
  }
  notes.insert(notes.end(), launch->notes.begin(), launch->notes.end());
  for (const std::string& n : notes) Say(n);
  std::string warning;
  if (absl::Status s = CheckTaskIsThisHost(*launch, IsLocalHost, &warning); !s.ok()) {
    Say(std::string(s.message()));
    return 2;
  }
  if (!warning.empty()) Say(absl::StrCat("warning: ", warning));

  std::vector<std::string> worker_args = f.worker_args;
  absl::StatusOr<std::string> kv_store = WorkersKvStore(f, launch->cluster.worker.size(), &worker_args);
  if (!kv_store.ok()) {
    Say(std::string(kv_store.status().message()));
    return 2;
  }
  const std::string scheduler = SchedulerAddressOf(launch->cluster, static_cast<int>(f.scheduler_port));
  const std::string canonical = CanonicalClusterSpec(launch->cluster);
  absl::StatusOr<HostPort> me = SplitHostPort(launch->address());  // checked when parsed
  if (!me.ok()) {
    Say(std::string(me.status().message()));
    return 2;
  }
  Env env = {
      {"DTRAIN_SCHEDULER_ADDR", scheduler},
      {"DTRAIN_NUM_WORKERS", std::to_string(launch->cluster.worker.size())},
      {"DTRAIN_NUM_SERVERS", std::to_string(launch->cluster.ps.size())},
      {"DTRAIN_NODE_HOST", me->host},
      {kClusterSpecEnv, canonical},
      ElasticEnv(f.elastic.spec),
  };
  // Every task is started by hand on its own host and restarted the same way: the
  // cluster spec is the one text they all share, so the job id is made from it unless
  // one is given. A restarted task then never brings the scheduler an id of its own
  // (docs/recovery.md).
  env.emplace_back("DTRAIN_JOB_ID", f.job.job_id.empty() ? JobIdOf(canonical) : f.job.job_id);
  const bool is_ps = launch->role == Role::kServer;
  Say(absl::StrCat("cluster spec from ", launch->source, ": ", launch->cluster.ps.size(), " ps, ",
                   launch->cluster.worker.size(), " workers; this task is ", launch->task_name, " at ",
                   launch->address(), " (dtrain ", is_ps ? "server " : "worker ", launch->rank, "); scheduler at ",
                   scheduler, launch->rank == 0 && !is_ps ? " (started here)" : ""));
  if (is_ps) {
    if (!f.worker_args.empty()) Say("the flags after -- are the workers'; dtrain-server runs without them");
    env.emplace_back("DTRAIN_RANK", std::to_string(launch->rank));
    env.emplace_back("DTRAIN_PORT", std::to_string(me->port));
    return ExecTask(f.bin_dir, "server", env, {});
  }
  if (launch->rank != 0) {
    env.emplace_back("DTRAIN_RANK", std::to_string(launch->rank));
    return ExecTask(f.bin_dir, "worker", env, worker_args);
  }
  return RunWithScheduler(f, scheduler, env, worker_args, *kv_store);
}

}  // namespace dtrain::launcher
