// dtrain-worker: trains one rank. Flags follow MXNet's train_mnist.py; the cluster
// comes from flags or DTRAIN_* / DMLC_* environment (see common/cluster_flags.h).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/elastic/elastic_spec.h"
#include "common/malloc_tuning.h"
#include "common/cluster_flags.h"
#include "common/credentials.h"
#include "common/log.h"
#include "common/shutdown_signal.h"
#include "common/tls/tls_flags.h"
#include "common/status_macros.h"
#include "common/metrics/metrics_flags.h"
#include "common/metrics/registry.h"
#include "services/worker/cluster_elastic.h"
#include "services/worker/elastic_steps.h"
#include "services/worker/gpu_devices.h"
#include "services/worker/leave_on_signal.h"
#include "services/worker/worker_metrics.h"
#include "services/worker/kv/dist_kvstore.h"
#include "services/worker/kv/local_kvstore.h"
#include "services/worker/kv/striped_channel.h"
#include "services/worker/scheduler_cluster.h"
#include "services/worker/trainer.h"

namespace dtrain::worker {
namespace {

// Cores shared among the workers of this host, so processes do not oversubscribe.
int DefaultThreads(int64_t local_workers) {
  const int64_t cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  return static_cast<int>(std::max<int64_t>(1, cores / std::max<int64_t>(1, local_workers)));
}

// The job this worker belongs to: the scheduler's (dist_*) or a job of one.
absl::StatusOr<std::unique_ptr<Cluster>> JoinCluster(const TrainOptions& options, const ClusterFlags& flags,
                                                     const elastic::ElasticSpec& spec) {
  if (!IsDistributed(options.mode)) {
    SetLogIdentity("worker", 0);
    return std::make_unique<LocalCluster>();
  }
  JoinOptions j;
  j.scheduler = flags.scheduler;
  j.num_workers = static_cast<int>(flags.job.num_workers);
  j.num_servers = static_cast<int>(flags.job.num_servers);
  j.replication = static_cast<int>(flags.job.replication);
  j.requested_rank = static_cast<int>(flags.rank);
  j.host = flags.host;
  DTRAIN_LOG(INFO) << "this worker's address is " << flags.host << " (" << flags.host_origin << ")";
  j.register_timeout = absl::Seconds(flags.job.register_timeout_s);
  j.heartbeat_interval = absl::Seconds(flags.heartbeat_interval_s);
  j.rejoin_timeout = absl::Seconds(flags.job.rejoin_timeout_s);
  j.job_id = flags.job.job_id;
  j.cluster_spec = flags.cluster_spec;
  if (spec.enabled()) j.elastic = absl::StrCat(spec.min_workers, ":", spec.max_workers);
  DTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SchedulerCluster> c, SchedulerCluster::Join(j));
  return std::unique_ptr<Cluster>(std::move(c));
}

absl::StatusOr<std::unique_ptr<KVStore>> CreateKVStore(const TrainOptions& options, const ClusterFlags& flags,
                                                       Cluster& cluster) {
  if (!IsDistributed(options.mode)) return std::make_unique<LocalKVStore>(options.mode);
  DistOptions d;
  d.mode = options.mode;
  d.staleness = static_cast<int>(options.staleness);
  d.weigh_stale = options.weigh_stale;
  d.max_chunk_elems = options.bigarray_bound;
  d.connect_timeout = absl::Seconds(flags.job.register_timeout_s);
  d.replication = static_cast<int>(flags.job.replication);
  d.sync_timeout = absl::Seconds(options.sync_timeout_s);
  d.compression = options.compression;
  d.pull_compression = options.pull_compression;
  d.gradient_scale = static_cast<double>(options.batch_size);  // MXNet's threshold units
  d.connections_per_server = options.connections_per_server != 0 ? static_cast<int>(options.connections_per_server)
                                                                 : DefaultConnectionsPerServer(TransportIsTls());
  if (ClusterElastic* elastic = cluster.elastic()) {
    d.elastic = true;
    if (elastic->joiner()) {
      DTRAIN_ASSIGN_OR_RETURN(d.join_step, AwaitJoinStep(*elastic, cluster.rank(),
                                                         absl::Now() + absl::Seconds(flags.job.register_timeout_s)));
    }
  }
  DTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DistKVStore> kv, DistKVStore::Connect(d, cluster));
  return std::unique_ptr<KVStore>(std::move(kv));
}

// Everything the worker's command line sets, checked.
struct WorkerConfig {
  TrainOptions options;
  ClusterFlags cluster;
  elastic::ElasticSpec elastic;  // --elastic: workers may join and leave (docs/elastic.md)
  metrics::MetricsFlags metrics;
  WorkerDevices devices;  // what --gpus / --cpu-replicas prepared
};

// Parses and checks the flags into `c`; an exit code when the worker must stop here
// (0 after --help, 2 after printing the first error).
std::optional<int> ParseWorkerFlags(int argc, char** argv, WorkerConfig* c) {
  FlagSet flags("dtrain-worker", "Trains a network on (Fashion-)MNIST as one worker of a dtrain job.");
  AddTrainFlags(flags, &c->options);
  c->cluster.job.mode = kDefaultWorkerMode;  // before the flags record it as the default
  AddClusterFlags(flags, &c->cluster, Role::kWorker);
  elastic::AddElasticFlags(flags, &c->elastic);
  metrics::AddMetricsFlags(flags, &c->metrics);
  absl::Status s = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::fputs(flags.Usage().c_str(), stdout);
    return 0;
  }
  if (s.ok()) s = FinishClusterFlags(&c->cluster, Role::kWorker, IsDistributed(c->cluster.job.mode));
  if (s.ok()) s = FinishTrainFlags(&c->options, c->cluster.job);
  if (s.ok()) s = elastic::CheckElasticSpec(c->elastic, c->cluster.job.num_workers, c->cluster.job.mode);
  if (s.ok()) s = metrics::CheckMetricsFlags(c->metrics);
  // --gpus is refused here, before the job waits on this worker, unless it can be honoured;
  // the NCCL communicator made here is the one the trainer's replicas use.
  if (s.ok()) {
    absl::StatusOr<WorkerDevices> devices =
        PrepareDevices(c->options.gpu_list, static_cast<int>(c->options.cpu_replicas));
    s = devices.status();
    if (s.ok()) c->devices = *std::move(devices);
  }
  // A worker serves no gRPC: nothing to warn about when plaintext.
  if (s.ok()) s = ApplyTlsFlags(c->cluster.tls, TlsUse::kClusterNode, /*listen_host=*/"");
  if (!s.ok()) {
    std::fprintf(stderr, "dtrain-worker: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  return std::nullopt;
}

// Says what is about to train; warns when dist_async meets a high momentum.
void LogTrainingStart(const TrainOptions& options, int threads) {
  DTRAIN_LOG(INFO) << "training " << options.network
                   << (options.network_spec.hidden.empty()
                           ? std::string()
                           : " (hidden " + models::HiddenText(options.network_spec.hidden) + ")")
                   << " with kv-store " << KVStoreModeName(options.mode) << ", " << threads << " LibTorch thread(s)";
  if (IsAsync(options.mode) && options.mom > 0.5) {
    // Stale gradients act as momentum of their own (Mitliagkas et al. 2016): MXNet's
    // default 0.9 on top of it diverges LeNet on Fashion-MNIST.
    DTRAIN_LOG(WARNING) << "dist_async with --mom " << options.mom
                        << ": staleness adds momentum of its own; if the loss grows, use --mom 0.5 or lower";
  }
}

// The result line (tests and scripts read its weights-fnv64), then the bytes on the wire.
void LogTrainingDone(const TrainResult& result, const KVStore& kv, const TrainOptions& options) {
  DTRAIN_LOG(INFO) << absl::StrFormat(
      "Training done: %d samples in %.3f s (%.2f samples/sec), Validation-accuracy=%f, weights-fnv64=%016x",
      result.samples, result.train_seconds,
      result.train_seconds > 0 ? static_cast<double>(result.samples) / result.train_seconds : 0.0,
      result.validation_accuracy, result.weights_fnv);
  // What the pushes cost on the wire against their float32 size (the compression ratio).
  if (const KVStoreStats bytes = kv.stats(); bytes.bytes_pushed > 0) {
    DTRAIN_LOG(INFO) << absl::StrFormat(
        "pushed %d bytes on the wire for %d bytes of float32 gradients (--gc-type %s, compression ratio %.2f); "
        "pulled %d bytes for %d bytes of float32 weights (--pull-gc-type %s, compression ratio %.2f)",
        bytes.bytes_pushed, bytes.bytes_pushed_uncompressed, kv::CompressionTypeName(options.compression.type),
        static_cast<double>(bytes.bytes_pushed_uncompressed) / static_cast<double>(bytes.bytes_pushed),
        bytes.bytes_pulled, bytes.bytes_pulled_uncompressed, kv::CompressionTypeName(options.pull_compression),
        bytes.bytes_pulled > 0
            ? static_cast<double>(bytes.bytes_pulled_uncompressed) / static_cast<double>(bytes.bytes_pulled)
            : 0.0);
  }
}

int Run(int argc, char** argv) {
  WorkerConfig c;
  if (std::optional<int> code = ParseWorkerFlags(argc, argv, &c)) return *code;
  // An elastic job's worker leaves on SIGTERM (leave_on_signal.h); constructed before
  // LibTorch and gRPC start threads, so that they inherit the blocked signals.
  std::optional<ShutdownSignal> signal;
  if (c.elastic.enabled()) signal.emplace();
  const TrainOptions& options = c.options;
  const int threads = options.threads > 0 ? static_cast<int>(options.threads) : DefaultThreads(options.local_workers);
  torch::set_num_threads(threads);
  SetLogIdentity("worker", static_cast<int>(c.cluster.rank));  // the rank asked for; final once known
  // Serving before registration, which may block for minutes: a launcher waits for
  // the port, and Prometheus sees the target up (without series until the rank is known).
  absl::StatusOr<metrics::RoleMetrics<WorkerMetrics>> metrics =
      metrics::StartRoleMetrics<WorkerMetrics>(c.metrics, "worker");
  if (!metrics.ok()) {
    DTRAIN_LOG(ERROR) << metrics.status().message();
    return 1;
  }

  absl::StatusOr<std::unique_ptr<Cluster>> cluster = JoinCluster(options, c.cluster, c.elastic);
  if (!cluster.ok()) {
    DTRAIN_LOG(ERROR) << "cannot join the cluster: " << cluster.status().message();
    return 1;
  }
  absl::StatusOr<std::unique_ptr<KVStore>> kv = CreateKVStore(options, c.cluster, **cluster);
  if (!kv.ok()) {
    DTRAIN_LOG(ERROR) << "cannot join the cluster: " << kv.status().message();
    return 1;
  }
  if (metrics->registry != nullptr) metrics->registry->SetRank((*cluster)->rank());
  LogTrainingStart(options, threads);

  std::optional<LeaveOnSignal> leave;
  if (signal && (*cluster)->elastic() != nullptr) leave.emplace(*signal, *(*cluster)->elastic());
  auto result = Train(options, **cluster, **kv, metrics->families.get(), std::move(c.devices));
  if (!result.ok()) {
    DTRAIN_LOG(ERROR) << "training failed: " << result.status().message();
    (void)(*cluster)->Finish(/*failed=*/true, std::string(result.status().message()));
    return 1;
  }
  if (result->left_at_step >= 0) {
    DTRAIN_LOG(INFO) << "worker " << (*cluster)->rank() << " left the job at step " << result->left_at_step;
    absl::Status left =
        (*cluster)->Finish(/*failed=*/false, absl::StrCat("left the job at step ", result->left_at_step));
    if (!left.ok()) DTRAIN_LOG(WARNING) << "could not tell the scheduler this worker left: " << left.message();
    return 0;
  }
  LogTrainingDone(*result, **kv, options);
  absl::Status left = (*cluster)->Finish(/*failed=*/false, "");
  if (!left.ok()) DTRAIN_LOG(WARNING) << "could not tell the scheduler we are done: " << left.message();
  return 0;
}

}  // namespace
}  // namespace dtrain::worker

int main(int argc, char** argv) {
  dtrain::TuneMallocForBulkTransfers();
  return dtrain::worker::Run(argc, argv);
}
