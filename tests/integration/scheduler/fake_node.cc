// A stand-in for dtrain-server and dtrain-worker in the scheduler and launcher
// tests: it speaks the scheduler protocol for real (register, heartbeat, barrier,
// leave) but trains nothing. The role comes from argv[0] (a symlink named
// dtrain-server or dtrain-worker) or --role.
//
//   --steps N, --step-ms MS   a worker's fake training (default 3 steps of 50 ms)
//   FAKE_NODE_EXIT=worker:1:3 worker 1 exits with status 3 after its steps,
//                             abruptly (no Leave, no destructors), as a crash would
//   FAKE_NODE_KILL=worker:1:2[:K]  worker 1 SIGKILLs itself after step 2, in its first K
//                             incarnations (DTRAIN_RESTART_COUNT < K; default 1, so a
//                             restart succeeds); a preemption or the OOM killer
//   FAKE_NODE_IGNORE_TERM=1   ignore SIGTERM (the launcher must escalate to SIGKILL)
//   FAKE_NODE_IGNORE_SHUTDOWN=1  a server stays 60 s after the scheduler's shutdown
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/cluster_flags.h"
#include "common/scheduler_client.h"

namespace {

int ExitCodeFor(const std::string& role, int rank) {
  const char* spec = std::getenv("FAKE_NODE_EXIT");
  const std::string prefix = absl::StrCat(role, ":", rank, ":");
  if (spec == nullptr || !absl::StartsWith(spec, prefix)) return 0;
  return std::atoi(spec + prefix.size());
}

// How often the launcher restarted us (dtrain launch --max-restarts).
int RestartCount() {
  const char* v = std::getenv("DTRAIN_RESTART_COUNT");
  return v == nullptr ? 0 : std::atoi(v);
}

// The step after which FAKE_NODE_KILL has this incarnation kill itself; 0: never.
int64_t KillStepFor(const std::string& role, int rank) {
  const char* spec = std::getenv("FAKE_NODE_KILL");
  const std::string prefix = absl::StrCat(role, ":", rank, ":");
  if (spec == nullptr || !absl::StartsWith(spec, prefix)) return 0;
  const std::vector<std::string> rest = absl::StrSplit(spec + prefix.size(), ':');
  const int incarnations = rest.size() > 1 ? std::atoi(rest[1].c_str()) : 1;
  return RestartCount() < incarnations ? std::atoll(rest[0].c_str()) : 0;
}

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

int Run(int argc, char** argv) {
  if (EnvSet("FAKE_NODE_IGNORE_TERM")) ::signal(SIGTERM, SIG_IGN);
  std::string role_name = argv[0];
  role_name = role_name.substr(role_name.rfind('/') + 1);
  if (absl::StartsWith(role_name, "dtrain-")) role_name = role_name.substr(7);
  std::string kv_store = "dist_sync";
  int64_t steps = 3, step_ms = 50;
  dtrain::ClusterFlags cluster;
  dtrain::FlagSet flags("fake_node", "test stand-in for dtrain-server / dtrain-worker");
  flags.AddString("role", &role_name, "server or worker");
  flags.AddString("kv-store", &kv_store, "kvstore mode");
  flags.AddInt("steps", &steps, "fake training steps");
  flags.AddInt("step-ms", &step_ms, "milliseconds per step");
  // A server's cluster flags: the fake declares its own --kv-store (any text).
  dtrain::AddClusterFlags(flags, &cluster, dtrain::Role::kServer);
  std::string args;
  for (int i = 1; i < argc; ++i) absl::StrAppend(&args, i > 1 ? " " : "", argv[i]);
  std::printf("fake %s starting pid=%d args=%s\n", role_name.c_str(), static_cast<int>(::getpid()), args.c_str());
  std::fflush(stdout);
  absl::Status s = flags.Parse(argc, argv);
  const bool worker = role_name == "worker";
  const bool dist = absl::StartsWith(kv_store, "dist");
  if (s.ok()) s = dtrain::FinishClusterFlags(&cluster, dtrain::Role::kServer, !worker || dist);
  if (!s.ok() || (!worker && role_name != "server")) {
    std::fprintf(stderr, "fake_node: %s\n", s.ok() ? "bad role" : std::string(s.message()).c_str());
    return 2;
  }
  if (!dist) {
    std::printf("fake worker local mode kv-store=%s\n", kv_store.c_str());
    return ExitCodeFor("worker", 0);
  }

  dtrain::SchedulerClient client(cluster.scheduler, cluster.cluster_spec);
  client.set_job_id(cluster.job.job_id);
  auto reg = client.Register(worker ? dtrain::v1::ROLE_WORKER : dtrain::v1::ROLE_SERVER, "127.0.0.1:1",
                             static_cast<int>(cluster.rank), static_cast<int>(cluster.job.num_workers),
                             static_cast<int>(cluster.job.num_servers), absl::Seconds(cluster.job.register_timeout_s));
  if (!reg.ok()) {
    std::fprintf(stderr, "fake %s: register: %s\n", role_name.c_str(), std::string(reg.status().message()).c_str());
    return 1;
  }
  const int rank = reg->rank();
  std::printf("fake %s registered rank=%d servers=%d restart_count=%d\n", role_name.c_str(), rank,
              reg->cluster().servers_size(), RestartCount());
  std::fflush(stdout);
  std::atomic<bool> shutdown{false};
  dtrain::SchedulerClient::HeartbeatHooks hooks;
  hooks.on_shutdown = [&shutdown](const std::string&) { shutdown = true; };
  client.StartHeartbeat(absl::Seconds(cluster.heartbeat_interval_s), hooks);

  if (!worker) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    const bool ignore = EnvSet("FAKE_NODE_IGNORE_SHUTDOWN");
    while ((ignore || !shutdown) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    std::printf("fake server %d shutting down (told=%d)\n", rank, shutdown.load() ? 1 : 0);
    return client.Leave(false, "").ok() ? 0 : 1;
  }
  const int64_t kill_step = KillStepFor("worker", rank);
  for (int64_t i = 1; i <= steps && !shutdown; ++i) {
    client.SetProgress(i, 100.0);
    // Half a line, then the rest: the launcher must join them.
    std::printf("partial-");
    std::fflush(stdout);
    absl::SleepFor(absl::Milliseconds(step_ms / 2));
    std::printf("line step=%lld\n", static_cast<long long>(i));
    std::fflush(stdout);
    if (i == kill_step) ::kill(::getpid(), SIGKILL);
    absl::SleepFor(absl::Milliseconds(step_ms - step_ms / 2));
  }
  if (const int code = ExitCodeFor("worker", rank); code != 0) {
    std::printf("fake worker %d failing with status %d\n", rank, code);
    std::fflush(stdout);
    ::_exit(code);  // no destructors: the heartbeat stream breaks only as the process ends
  }
  absl::Status b = client.Barrier("done", dtrain::v1::BARRIER_GROUP_WORKERS, absl::Seconds(30));
  std::printf("fake worker %d barrier: %s\n", rank, b.ToString().c_str());
  s = client.Leave(false, "");
  std::printf("fake worker %d done\n", rank);
  return b.ok() && s.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
