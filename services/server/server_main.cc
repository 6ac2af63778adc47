// dtrain-server: one parameter server. Flags and wiring only; the work is in
// ShardStore (common/kv) and PsService.
//
//   dtrain-server --scheduler 10.0.0.1:9091 --num-workers 2 --num-servers 1
//   dtrain-server --standalone --port 0 --port-file /tmp/ps.port   (tests, benchmarks)
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/malloc_tuning.h"
#include "common/cluster_flags.h"
#include "common/flags.h"
#include "common/grpc_util.h"
#include "common/kv/shard_store.h"
#include "common/log.h"
#include "common/port_file.h"
#include "common/metrics/metrics_flags.h"
#include "common/metrics/registry.h"
#include "services/server/server_metrics.h"
#include "common/scheduler_client.h"
#include "services/server/ps_service.h"
#include "services/server/store_metrics.h"

namespace dtrain::server {
namespace {

struct ServerFlags {
  ClusterFlags cluster;
  metrics::MetricsFlags metrics;
  double sync_timeout_s = 120;
  std::string port_file;
  bool standalone = false;
};


// Why the server should stop: SIGTERM/SIGINT or the scheduler. The signals are
// blocked in every thread and taken by one thread with sigtimedwait, so there is no
// async handler. Construct it before any other thread starts.
class ShutdownWatcher {
 public:
  ShutdownWatcher() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGTERM);
    sigaddset(&signals_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    thread_ = std::thread([this] { Loop(); });
  }
  ~ShutdownWatcher() {
    stop_.store(true);
    thread_.join();
  }

  void Request(const std::string& reason) {
    absl::MutexLock lock(&mu_);
    if (reason_.empty()) reason_ = reason;
  }
  // While set, a signal ends the process at once: Register may block for minutes and
  // leaves nothing to undo.
  void set_exit_on_signal(bool exit) { exit_on_signal_.store(exit); }
  // Blocks until Request (a daemon's main wait; the heartbeat watches liveness).
  std::string Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(+[](std::string* r) { return !r->empty(); }, &reason_));
    return reason_;
  }

 private:
  void Loop() {
    while (!stop_.load()) {
      timespec tick{0, 200 * 1000 * 1000};
      const int sig = sigtimedwait(&signals_, nullptr, &tick);
      if (sig != SIGTERM && sig != SIGINT) continue;
      const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
      if (exit_on_signal_.load()) {
        DTRAIN_LOG(INFO) << "stopping (" << name << ") before registration finished";
        std::_Exit(0);
      }
      Request(name);
    }
  }

  sigset_t signals_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> exit_on_signal_{false};
  absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

int Run(int argc, char** argv) {
  ShutdownWatcher watcher;
  ServerFlags f;
  FlagSet flags("dtrain-server", "A dtrain parameter server: holds a shard of the model's keys.");
  AddClusterFlags(flags, &f.cluster);
  metrics::AddMetricsFlags(flags, &f.metrics);
  flags.AddDouble("sync-timeout", &f.sync_timeout_s,
                  "seconds a sync pull waits for every worker's push before failing", {"DTRAIN_SYNC_TIMEOUT"});
  flags.AddString("port-file", &f.port_file, "write the bound port to this file (atomically)");
  flags.AddBool("standalone", &f.standalone, "serve without a scheduler (tests, benchmarks)");
  absl::Status s = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  if (s.ok()) s = FinishClusterFlags(&f.cluster, /*need_scheduler=*/!f.standalone);
  if (s.ok()) s = metrics::CheckMetricsFlags(f.metrics);
  if (s.ok() && !(f.sync_timeout_s > 0)) {
    s = absl::InvalidArgumentError(absl::StrCat("--sync-timeout must be > 0, got ", f.sync_timeout_s));
  }
  if (!s.ok()) {
    std::cerr << "dtrain-server: " << s.message() << "\n";
    return 2;
  }

  // Lines before registration name the role (and the rank asked for, if any) too.
  SetLogIdentity("server", static_cast<int>(f.cluster.rank));
  // Declared before the store: parked pulls still count when the store fails them.
  absl::StatusOr<std::unique_ptr<metrics::MetricsRegistry>> registry = metrics::StartMetrics(f.metrics, "server");
  if (!registry.ok()) {
    DTRAIN_LOG(ERROR) << registry.status().message();
    return 1;
  }
  std::unique_ptr<server::ServerMetrics> server_metrics;
  std::unique_ptr<StoreMetrics> store_metrics;
  if (*registry != nullptr) {
    server_metrics = std::make_unique<server::ServerMetrics>(**registry);
    store_metrics = std::make_unique<StoreMetrics>(server_metrics.get());
  }
  kv::ShardStore store;
  store.SetObserver(store_metrics.get());
  PsServiceOptions options;
  options.sync_timeout = absl::Seconds(f.sync_timeout_s);
  options.metrics = server_metrics.get();
  PsService service(&store, options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  int port = 0;
  builder.AddListeningPort(absl::StrCat("0.0.0.0:", f.cluster.port), grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    DTRAIN_LOG(ERROR) << "cannot listen on 0.0.0.0:" << f.cluster.port;
    return 1;
  }
  const std::string address = absl::StrCat(f.cluster.host, ":", port);
  if (!f.port_file.empty()) {
    if (absl::Status ps = WritePortFile(f.port_file, port); !ps.ok()) {
      DTRAIN_LOG(ERROR) << ps.message();
      return 1;
    }
  }

  std::unique_ptr<SchedulerClient> scheduler;
  int rank = f.cluster.rank >= 0 ? static_cast<int>(f.cluster.rank) : 0;
  if (!f.standalone) {
    scheduler = std::make_unique<SchedulerClient>(f.cluster.scheduler);
    watcher.set_exit_on_signal(true);
    absl::StatusOr<v1::RegisterResponse> reg = scheduler->Register(
        v1::ROLE_SERVER, address, static_cast<int>(f.cluster.rank), static_cast<int>(f.cluster.num_workers),
        static_cast<int>(f.cluster.num_servers), absl::Seconds(f.cluster.register_timeout_s));
    if (!reg.ok()) {
      DTRAIN_LOG(ERROR) << "server at " << address << ": registering with scheduler " << f.cluster.scheduler
                        << " failed: " << reg.status().message();
      server->Shutdown(DeadlineAfter(absl::Seconds(1)));
      return 1;
    }
    watcher.set_exit_on_signal(false);
    rank = reg->rank();
    SchedulerClient::HeartbeatHooks hooks;
    hooks.on_shutdown = [&watcher](const std::string& reason) {
      watcher.Request(absl::StrCat("scheduler: ", reason.empty() ? "the job is over" : reason));
    };
    hooks.on_dead = [](const v1::NodeInfo& node) {
      DTRAIN_LOG(WARNING) << v1::Role_Name(node.role()) << " " << node.rank() << " at " << node.address()
                          << " is dead; sync steps waiting for it will time out";
    };
    scheduler->StartHeartbeat(absl::Seconds(f.cluster.heartbeat_interval_s), std::move(hooks));
  }
  SetLogIdentity("server", rank);
  if (*registry != nullptr) (*registry)->SetRank(rank);
  DTRAIN_LOG(INFO) << "listening on " << address
                   << (f.standalone ? " (standalone)" : "");

  const std::string why = watcher.Wait();
  DTRAIN_LOG(INFO) << "stopping (" << why << "): " << store.updates_applied() << " updates applied to "
                   << store.num_keys() << " keys";
  // Streams still open after the grace period are cancelled; parked pulls are dropped.
  server->Shutdown(DeadlineAfter(absl::Seconds(5)));
  if (scheduler != nullptr) {
    if (absl::Status ls = scheduler->Leave(/*failed=*/false, why, absl::Seconds(3)); !ls.ok()) {
      DTRAIN_LOG(WARNING) << "Leave: " << ls.message();
    }
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::server

int main(int argc, char** argv) {
  dtrain::TuneMallocForBulkTransfers();
  return dtrain::server::Run(argc, argv);
}
