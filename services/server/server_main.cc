// dtrain-server: one parameter server. Flags and wiring only; the work is in
// ShardStore (common/kv) and PsService.
//
//   dtrain-server --scheduler 10.0.0.1:9091 --num-workers 2 --num-servers 1
//   dtrain-server --standalone --port 0 --port-file /tmp/ps.port   (tests, benchmarks)
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/malloc_tuning.h"
#include "common/auth/node_token.h"
#include "common/cluster_flags.h"
#include "common/credentials.h"
#include "common/flags.h"
#include "common/grpc_util.h"
#include "common/kv/shard_store.h"
#include "common/log.h"
#include "common/net_address.h"
#include "common/port_file.h"
#include "common/shutdown_signal.h"
#include "common/tls/tls_flags.h"
#include "common/metrics/metrics_flags.h"
#include "common/metrics/registry.h"
#include "services/server/server_metrics.h"
#include "services/server/snapshot_metrics.h"
#include "services/server/snapshot_rollback.h"
#include "services/server/snapshot_writer.h"
#include "common/scheduler_client.h"
#include "services/server/ps_service.h"
#include "services/server/store_metrics.h"
#include "common/defaults.h"
#include "common/elastic/elastic_spec.h"
#include "common/kvstore_mode.h"
#include "common/status_macros.h"
#include "services/server/membership_orders.h"
#include "services/server/server_membership.h"

namespace dtrain::server {
namespace {

struct ServerFlags {
  ClusterFlags cluster;
  // --elastic MIN:MAX (docs/elastic.md): sent when registering; the scheduler's
  // membership then decides which workers each step merges.
  elastic::ElasticSpec elastic;
  metrics::MetricsFlags metrics;
  std::string port_file;
  bool standalone = false;
  // Caps on what clients may make this server hold (kv::StoreLimits, StreamOptions).
  kv::StoreLimits limits;
  int64_t max_workers = kv::StoreLimits().max_workers;
  int64_t max_stream_pending = StreamOptions().max_pending_requests;
  int64_t max_stream_queued_bytes = StreamOptions().max_queued_bytes;
  bool allow_non_finite = false;
  // Shard snapshots: every N steps into this directory; 0: none.
  int64_t snapshot_every = 0;
  std::string snapshot_dir;
};

// The hardening flags: every count and size a client sends is capped. The variables
// reach servers that `dtrain launch` starts.
void AddLimitFlags(FlagSet& flags, ServerFlags* f) {
  flags.AddInt("max-workers", &f->max_workers, "refuse a Configure with more workers than this",
               {"DTRAIN_MAX_WORKERS"});
  flags.AddInt("max-keys", &f->limits.max_keys, "refuse InitKeys beyond this many keys on this server",
               {"DTRAIN_MAX_KEYS"});
  flags.AddInt("max-shard-bytes", &f->limits.max_bytes,
               "refuse InitKeys beyond this many bytes of weights (twice in dist_sync: the previous version is "
               "kept) plus optimizer state on this server",
               {"DTRAIN_MAX_SHARD_BYTES"});
  flags.AddInt("max-stream-pending", &f->max_stream_pending,
               "a PushPull stream stops reading while this many of its requests await an answer",
               {"DTRAIN_MAX_STREAM_PENDING"});
  flags.AddInt("max-stream-queued-bytes", &f->max_stream_queued_bytes,
               "a PushPull stream stops reading while its unsent answers hold this many bytes",
               {"DTRAIN_MAX_STREAM_QUEUED_BYTES"});
  flags.AddBool("allow-non-finite", &f->allow_non_finite,
                "apply pushed gradients holding NaN or Inf (default: refuse them with an error to the worker)",
                {"DTRAIN_ALLOW_NON_FINITE"});
}

absl::Status CheckLimitFlags(ServerFlags* f) {
  const std::pair<const char*, int64_t> positive[] = {{"max-workers", f->max_workers},
                                                      {"max-keys", f->limits.max_keys},
                                                      {"max-shard-bytes", f->limits.max_bytes},
                                                      {"max-stream-pending", f->max_stream_pending},
                                                      {"max-stream-queued-bytes", f->max_stream_queued_bytes}};
  for (const auto& [name, value] : positive) {
    if (value < 1) return absl::InvalidArgumentError(absl::StrCat("--", name, " must be >= 1, got ", value));
  }
  if (f->max_workers > (1 << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-workers must be <= 16777216, got ", f->max_workers));
  }
  f->limits.max_workers = static_cast<int>(f->max_workers);
  return absl::OkStatus();
}

// --elastic against the job's shape. A server is told its merge mode by worker 0's
// Configure, not by a flag: the store refuses any but dist_sync then (SetStepRanks).
absl::Status CheckElasticFlags(const ServerFlags& f) {
  DTRAIN_RETURN_IF_ERROR(elastic::CheckElasticSpec(f.elastic, f.cluster.job.num_workers, KVStoreMode::kDistSync));
  if (!f.elastic.enabled()) return absl::OkStatus();
  if (f.standalone) {
    return absl::InvalidArgumentError(
        "--elastic needs a scheduler, whose membership decides each step's workers; "
        "not with --standalone");
  }
  if (f.elastic.max_workers > f.limits.max_workers) {
    return absl::InvalidArgumentError(absl::StrCat("--elastic ", f.elastic.min_workers, ":", f.elastic.max_workers,
                                                   ": MAX is over --max-workers ", f.limits.max_workers));
  }
  return absl::OkStatus();
}

absl::Status ParseFlags(int argc, char** argv, ServerFlags* f, bool* help) {
  FlagSet flags("dtrain-server", "A dtrain parameter server: holds a shard of the model's keys.");
  AddClusterFlags(flags, &f->cluster, Role::kServer);
  elastic::AddElasticFlags(flags, &f->elastic);
  metrics::AddMetricsFlags(flags, &f->metrics);
  flags.AddString("port-file", &f->port_file, "write the bound port to this file (atomically)");
  flags.AddBool("standalone", &f->standalone, "serve without a scheduler (tests, benchmarks)");
  AddLimitFlags(flags, f);
  flags.AddInt("snapshot-every", &f->snapshot_every,
               "dist_sync: write this server's shard to --snapshot-dir every N steps (the newest two are kept) so "
               "that the job can roll back to it if the shard is lost; 0: off",
               {"DTRAIN_SNAPSHOT_EVERY"});
  flags.AddString("snapshot-dir", &f->snapshot_dir,
                  "where --snapshot-every writes server-<rank>-step-<S>.snapshot (dtrain launch: beside the model "
                  "prefix)",
                  {"DTRAIN_SNAPSHOT_DIR"});
  absl::Status s = flags.Parse(argc, argv);
  *help = flags.help_requested();
  if (*help) {
    std::cout << flags.Usage();
    return absl::OkStatus();
  }
  if (s.ok()) s = FinishClusterFlags(&f->cluster, Role::kServer, /*need_scheduler=*/!f->standalone);
  if (s.ok()) s = metrics::CheckMetricsFlags(f->metrics);
  if (s.ok()) s = CheckLimitFlags(f);
  if (s.ok()) s = CheckElasticFlags(*f);
  if (s.ok()) s = ApplyTlsFlags(f->cluster.tls, TlsUse::kClusterNode, f->cluster.bind_host);
  if (s.ok() && f->snapshot_every < 0) {
    s = absl::InvalidArgumentError(absl::StrCat("--snapshot-every must be >= 0, got ", f->snapshot_every));
  }
  if (s.ok() && f->snapshot_every > 0 && f->snapshot_dir.empty()) {
    s = absl::InvalidArgumentError(
        "--snapshot-every needs --snapshot-dir (dtrain launch sets it beside the model prefix)");
  }
  return s;
}

// Elastic jobs (docs/elastic.md): adopts the membership the scheduler answered with and
// makes `*orders`, which carries out its membership orders (through `hooks`) and
// reports on every heartbeat. Before the heartbeat starts. `membership` null: this
// server has no --elastic; a membership then, or none with --elastic, is refused.
absl::Status JoinMembership(const v1::RegisterResponse& reg, ServerMembership* membership, kv::ShardStore& store,
                            SchedulerClient& scheduler, std::unique_ptr<MembershipOrders>* orders,
                            SchedulerClient::HeartbeatHooks* hooks) {
  if (!reg.has_membership()) {
    if (membership == nullptr) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "this server has --elastic ", membership->BoundsText(),
        " but the scheduler sent no membership: it runs a job that is not elastic (give every process the same "
        "--elastic)"));
  }
  if (membership == nullptr) {
    return absl::FailedPreconditionError(
        "the scheduler runs an elastic job but this server has no --elastic MIN:MAX (give every process the same "
        "--elastic, or DTRAIN_ELASTIC)");
  }
  DTRAIN_RETURN_IF_ERROR(membership->Adopt(reg.membership(), &store));
  *orders = std::make_unique<MembershipOrders>(membership->gate(), &store, [&scheduler] { scheduler.HeartbeatNow(); });
  MembershipOrders* o = orders->get();
  hooks->on_membership_order = [o](const v1::MembershipOrder& order) { o->OnOrder(order); };
  scheduler.SetMembershipReportSource([o] { return o->Report(); });
  return absl::OkStatus();
}

// Registers `address` with the scheduler and starts the heartbeat, which turns the
// scheduler's end of the job into a request on `stop`. Returns the rank given.
// `membership` (null: not elastic) and *orders: JoinMembership.
absl::StatusOr<int> JoinJob(const ClusterFlags& cluster, const std::string& address, SchedulerClient& scheduler,
                            ShutdownSignal& stop, SnapshotRollback* rollback, ReplicaCatchUp* catch_up,
                            auth::TokenKeyring* node_tokens, kv::ShardStore& store, ServerMembership* membership,
                            std::unique_ptr<MembershipOrders>* orders) {
  stop.set_exit_on_signal(true, "before registration finished");
  scheduler.set_job_id(cluster.job.job_id);  // empty: the scheduler's (learnt from Register)
  scheduler.set_replication(static_cast<int>(cluster.job.replication));
  scheduler.set_elastic(membership != nullptr ? membership->BoundsText() : "");
  absl::StatusOr<v1::RegisterResponse> reg = scheduler.Register(
      v1::ROLE_SERVER, address, static_cast<int>(cluster.rank), static_cast<int>(cluster.job.num_workers),
      static_cast<int>(cluster.job.num_servers), absl::Seconds(cluster.job.register_timeout_s));
  if (!reg.ok()) return reg.status();
  if (node_tokens != nullptr) {
    if (reg->token_key().empty()) {
      return absl::FailedPreconditionError(
          "the scheduler issued no token key: it runs without TLS while this server has it (--tls-* on every "
          "process, or --insecure on every one)");
    }
    node_tokens->Set(reg->token_key());
  }
  stop.set_exit_on_signal(false);
  SchedulerClient::HeartbeatHooks hooks;
  hooks.on_shutdown = [&stop](const std::string& reason) {
    stop.Request(absl::StrCat("scheduler: ", reason.empty() ? "the job is over" : reason));
  };
  hooks.on_dead = [](const v1::NodeInfo& node) {
    DTRAIN_LOG(WARNING) << v1::Role_Name(node.role()) << " " << node.rank() << " at " << node.address()
                        << " is dead; sync steps waiting for it will time out";
  };
  if (rollback != nullptr) {
    hooks.on_rollback = [rollback](const v1::RollbackOrder& order) { rollback->OnOrder(order); };
  }
  if (catch_up != nullptr) {
    // A restarted chain member starts empty: we copy it our keys of its chains.
    hooks.on_rejoined = [catch_up](const v1::NodeInfo& node) {
      if (node.role() == v1::ROLE_SERVER) catch_up->ServerRestarted(node.rank(), node.address());
    };
  }
  DTRAIN_RETURN_IF_ERROR(JoinMembership(*reg, membership, store, scheduler, orders, &hooks));
  // As long as the job waits for a replaced worker, it waits for a restarted scheduler.
  hooks.reconnect_for = std::max(hooks.reconnect_for, absl::Seconds(cluster.job.rejoin_timeout_s));
  scheduler.StartHeartbeat(absl::Seconds(cluster.heartbeat_interval_s), std::move(hooks));
  return reg->rank();
}

void Shutdown(const std::string& why, const kv::ShardStore& store, grpc::Server& server, SchedulerClient* scheduler) {
  const int64_t updates = store.updates_applied();
  const absl::Duration took = store.update_time();
  DTRAIN_LOG(INFO) << "stopping (" << why << "): " << updates << " updates applied to " << store.num_keys()
                   << " keys; merging and applying them took "
                   << absl::StrFormat("%.3f s (%.3f ms each)", absl::ToDoubleSeconds(took),
                                      updates == 0 ? 0.0 : absl::ToDoubleMilliseconds(took) / updates);
  // Streams still open after the grace period are cancelled; parked pulls are dropped.
  server.Shutdown(DeadlineAfter(absl::Seconds(5)));
  if (scheduler != nullptr) {
    if (absl::Status ls = scheduler->Leave(/*failed=*/false, why, absl::Seconds(3)); !ls.ok()) {
      DTRAIN_LOG(WARNING) << "Leave: " << ls.message();
    }
  }
}

// --snapshot-every: the writer, and its metrics where `registry` (null: none) serves them.
void MakeSnapshots(const ServerFlags& f, metrics::MetricsRegistry* registry, kv::ShardStore* store,
                   std::unique_ptr<SnapshotMetrics>* snapshot_metrics, std::unique_ptr<SnapshotWriter>* snapshots) {
  if (f.snapshot_every <= 0) return;
  if (registry != nullptr) *snapshot_metrics = std::make_unique<SnapshotMetrics>(*registry);
  *snapshots = std::make_unique<SnapshotWriter>(SnapshotOptions{f.snapshot_dir, f.snapshot_every, 2}, store,
                                                snapshot_metrics->get());
}

// What the service holds besides the store from its start, into `options`: replication's
// catch-up, which the scheduler tells of restarted servers (our rank is not known yet,
// and it never names ourselves), and an elastic job's membership, empty until
// registration fills it.
void MakeServiceParts(const ServerFlags& f, kv::ShardStore* store, ServerMetrics* metrics, PsServiceOptions* options,
                      std::unique_ptr<ReplicaCatchUp>* catch_up, std::unique_ptr<ServerMembership>* membership) {
  if (f.cluster.job.replication > 1 && !f.standalone) {
    *catch_up = std::make_unique<ReplicaCatchUp>(store, /*my_rank=*/-1, metrics);
    options->catch_up = catch_up->get();
  }
  if (f.elastic.enabled()) {
    *membership = std::make_unique<ServerMembership>(f.elastic);
    options->membership = membership->get();
  }
}

// Serves `service` on --bind-host:--port and writes the port chosen to --port-file;
// null (logged) when either fails.
std::unique_ptr<grpc::Server> Listen(const ServerFlags& f, PsService* service, int* port) {
  const std::string listen = JoinHostPort(f.cluster.bind_host, static_cast<int>(f.cluster.port));
  std::unique_ptr<grpc::Server> server = StartGrpcServer(listen, service, port);
  if (server == nullptr) return nullptr;
  if (!f.port_file.empty()) {
    if (absl::Status ps = WritePortFile(f.port_file, *port); !ps.ok()) {
      DTRAIN_LOG(ERROR) << ps.message();
      return nullptr;
    }
  }
  return server;
}

// What the PushPull streams and the other RPCs take from the flags.
PsServiceOptions ServiceOptions(const ServerFlags& f, ServerMetrics* metrics) {
  PsServiceOptions options;
  options.sync_timeout = absl::Seconds(f.cluster.job.sync_timeout_s);
  options.metrics = metrics;
  options.request_limits.max_payload_bytes = kMaxMessageBytes;  // what gRPC lets in at all
  options.allow_non_finite = f.allow_non_finite;
  options.max_pending_requests = f.max_stream_pending;
  options.max_queued_bytes = f.max_stream_queued_bytes;
  return options;
}

// Registers with the scheduler (the server listens at `address`) and wires what it
// drives: the rollback of `snapshots` (null: none; *rollback then stays null), the
// step and incarnation reports, the job id, an elastic job's membership (`membership`,
// null: none; *orders). Returns the rank given; an error is logged. *rollback and
// *orders are declared before *scheduler by the caller: the client's heartbeat thread
// calls them until the client is destroyed.
absl::StatusOr<int> Register(const ServerFlags& f, const std::string& address, kv::ShardStore& store,
                             SnapshotWriter* snapshots, ShutdownSignal& stop, ReplicaCatchUp* catch_up,
                             auth::TokenKeyring* node_tokens, ServerMembership* membership,
                             std::unique_ptr<MembershipOrders>* orders, std::unique_ptr<SnapshotRollback>* rollback,
                             std::unique_ptr<SchedulerClient>* scheduler) {
  *scheduler = std::make_unique<SchedulerClient>(f.cluster.scheduler, f.cluster.cluster_spec);
  if (snapshots != nullptr) {
    SchedulerClient* client = scheduler->get();
    *rollback = std::make_unique<SnapshotRollback>(
        f.snapshot_dir, &store, snapshots,
        [client](const v1::SnapshotReport& report) { client->SetSnapshotReport(report); });
    snapshots->SetOnWritten([r = rollback->get()] { r->Report(); });
    (*rollback)->SetOnLoaded([membership](int64_t step) {
      if (elastic::MembershipGate* gate = membership != nullptr ? membership->gate() : nullptr) gate->RolledBack(step);
    });
  }
  // The shard's step on every heartbeat (`dtrain status`, the rollback's log line).
  (*scheduler)->SetStepSource([&store] { return store.Step(); });
  // A restarted scheduler learns from the servers how far each worker rank's
  // incarnations went, so that it never hands a new process an old one.
  (*scheduler)->SetWorkerIncarnationSource([&store] { return store.WorkerIncarnations(); });
  absl::StatusOr<int> given =
      JoinJob(f.cluster, address, **scheduler, stop, rollback->get(), catch_up, node_tokens, store, membership, orders);
  if (!given.ok()) {
    DTRAIN_LOG(ERROR) << "server at " << address << ": registering with scheduler " << f.cluster.scheduler
                      << " failed: " << given.status().message();
    return given;
  }
  if (absl::Status js = store.SetJobId((*scheduler)->job_id()); !js.ok()) {
    // A worker of another job reached this server before the scheduler answered.
    DTRAIN_LOG(ERROR) << "the scheduler runs job '" << (*scheduler)->job_id() << "': " << js.message();
  }
  return given;
}

// Now that the rank is known: logs and metrics (`registry`, null: none) carry it, the
// snapshots' rollback starts, and the server says where it listens. `scheduler` is
// null for a standalone server (which has no rollback).
void Announce(const ServerFlags& f, int rank, int port, const std::string& address, const kv::ShardStore& store,
              metrics::MetricsRegistry* registry, SnapshotWriter* snapshots, SnapshotRollback* rollback,
              SchedulerClient* scheduler) {
  SetLogIdentity("server", rank);
  if (registry != nullptr) registry->SetRank(rank);
  if (snapshots != nullptr) {
    snapshots->SetRank(rank);
    // A new process admitted into a running job replaces a server whose shard died with
    // it: unless a rollback brings the snapshot back, it holds nothing.
    if (rollback != nullptr) rollback->Start(rank, /*replaced=*/scheduler->rejoined());
    DTRAIN_LOG(INFO) << "snapshots every " << f.snapshot_every << " steps in " << f.snapshot_dir;
  }
  DTRAIN_LOG(INFO) << "listening on " << JoinHostPort(f.cluster.bind_host, port)
                   << (f.standalone ? " (standalone)" : "") << "; other nodes reach it at " << address << " ("
                   << f.cluster.host_origin << ")"
                   << (store.job_id().empty() ? std::string() : absl::StrCat("; job '", store.job_id(), "'"));
}

int Run(int argc, char** argv) {
  ShutdownSignal stop;  // first: every later thread inherits the blocked signals
  ServerFlags f;
  bool help = false;
  if (absl::Status s = ParseFlags(argc, argv, &f, &help); !s.ok() || help) {
    if (!s.ok()) std::cerr << "dtrain-server: " << s.message() << "\n";
    return s.ok() ? 0 : 2;
  }

  // Lines before registration name the role (and the rank asked for, if any) too.
  SetLogIdentity("server", static_cast<int>(f.cluster.rank));
  // Declared before the store: parked pulls still count when the store fails them.
  absl::StatusOr<metrics::RoleMetrics<ServerMetrics>> metrics =
      metrics::StartRoleMetrics<ServerMetrics>(f.metrics, "server");
  if (!metrics.ok()) {
    DTRAIN_LOG(ERROR) << metrics.status().message();
    return 1;
  }
  std::unique_ptr<StoreMetrics> store_metrics;
  if (metrics->families != nullptr) store_metrics = std::make_unique<StoreMetrics>(metrics->families.get());
  kv::ShardStore store;
  store.SetObserver(store_metrics.get());
  store.SetLimits(f.limits);
  // Before the service starts: the store must be configured with the snapshot hook.
  std::unique_ptr<SnapshotMetrics> snapshot_metrics;
  std::unique_ptr<SnapshotWriter> snapshots;
  MakeSnapshots(f, metrics->registry.get(), &store, &snapshot_metrics, &snapshots);
  // Workers of another job are refused (docs/recovery.md); without --job-id the store
  // takes the scheduler's once registered.
  if (absl::Status js = store.SetJobId(f.cluster.job.job_id); !js.ok()) {
    DTRAIN_LOG(ERROR) << "--job-id: " << js.message();
    return 2;
  }
  PsServiceOptions options = ServiceOptions(f, metrics->families.get());
  std::unique_ptr<ReplicaCatchUp> catch_up;
  std::unique_ptr<ServerMembership> membership;
  MakeServiceParts(f, &store, metrics->families.get(), &options, &catch_up, &membership);
  // With TLS every call must carry a node token, checked with the key the scheduler
  // gives at registration (common/auth/node_token.h). A standalone server has no
  // scheduler to issue tokens: mutual TLS alone admits any certificate of the CA.
  auth::TokenKeyring node_tokens;
  const bool check_tokens = TransportIsTls() && !f.standalone;
  if (check_tokens) options.node_tokens = &node_tokens;
  PsService service(&store, options);

  int port = 0;
  std::unique_ptr<grpc::Server> server = Listen(f, &service, &port);
  if (server == nullptr) return 1;
  const std::string address = JoinHostPort(f.cluster.host, port);

  // Declared before the client, whose heartbeat thread calls it until destroyed.
  std::unique_ptr<SnapshotRollback> rollback;  // with a scheduler and --snapshot-every
  std::unique_ptr<MembershipOrders> orders;    // elastic jobs
  std::unique_ptr<SchedulerClient> scheduler;
  int rank = f.cluster.rank >= 0 ? static_cast<int>(f.cluster.rank) : 0;
  if (!f.standalone) {
    absl::StatusOr<int> given =
        Register(f, address, store, snapshots.get(), stop, catch_up.get(), check_tokens ? &node_tokens : nullptr,
                 membership.get(), &orders, &rollback, &scheduler);
    if (!given.ok()) {
      server->Shutdown(DeadlineAfter(absl::Seconds(1)));
      return 1;
    }
    rank = *given;
  }
  Announce(f, rank, port, address, store, metrics->registry.get(), snapshots.get(), rollback.get(), scheduler.get());

  Shutdown(stop.Wait(), store, *server, scheduler.get());
  // No pushes come any more: stop the writer (whose callbacks reach the client) first.
  snapshots.reset();
  // A job that failed (or a scheduler that vanished) must not look like a success
  // to whoever runs us (Kubernetes, a launcher).
  if (scheduler != nullptr && scheduler->job_failed()) {
    DTRAIN_LOG(ERROR) << "exiting with 1: the job failed";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace dtrain::server

int main(int argc, char** argv) {
  dtrain::TuneMallocForBulkTransfers();
  return dtrain::server::Run(argc, argv);
}
