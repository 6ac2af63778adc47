// dtrain-infer: serves a trained checkpoint over gRPC, in two protocols on one port:
// dtrain.v1.Inference and the Open Inference Protocol (KServe v2,
// inference.GRPCInferenceService); with the standard health service and server
// reflection (v1 and v1alpha). Flags and wiring only; the work is in LoadedModel,
// ModelHolder, CheckpointWatcher, BatchedForward, InferenceService and
// OpenInferenceService.
//
//   dtrain-infer --model-prefix model/fmnist-lenet --port 9000
//   dtrain-infer --model-prefix /ckpt/m --wait-for-model 600 --port-file /tmp/infer.port
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <ATen/Parallel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/credentials.h"
#include "common/flags.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/net_address.h"
#include "common/port_file.h"
#include "common/shutdown_signal.h"
#include "common/tls/tls_flags.h"
#include "services/inference/inference_metrics.h"
#include "common/metrics/metrics_flags.h"
#include "common/metrics/registry.h"
#include "services/inference/checkpoint_watcher.h"
#include "services/inference/infer_server.h"
#include "services/inference/inference_service.h"
#include "services/inference/open_inference_codec.h"
#include "services/inference/open_inference_service.h"
#include "services/inference/model_holder.h"

namespace dtrain::inference {
namespace {

constexpr char kServiceName[] = "dtrain.v1.Inference";
constexpr char kOipServiceName[] = "inference.GRPCInferenceService";
// How often the start-up wait looks for a first checkpoint, and says what it misses.
constexpr absl::Duration kFirstModelPoll = absl::Milliseconds(250);
constexpr absl::Duration kWaitReportEvery = absl::Seconds(10);
// How long running calls get to finish on SIGTERM.
constexpr absl::Duration kDrainTimeout = absl::Seconds(5);

struct InferFlags {
  std::string model_prefix;
  int64_t epoch = 0;
  std::string host = "0.0.0.0";
  int64_t port = 0;
  std::string port_file;
  double watch_interval_s = 5;
  int64_t max_batch = 1024;
  int64_t threads = 0;
  int64_t max_batch_size = 8;
  int64_t max_batch_delay_us = 500;
  std::string model_name;
  int64_t intra_op_threads = 1;
  double wait_for_model_s = 0;
  metrics::MetricsFlags metrics;
  TlsFlags tls;
  std::string auth_token_file;
};

absl::Status CheckFlags(const InferFlags& f) {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(what); };
  if (f.model_prefix.empty()) return bad("--model-prefix (or DTRAIN_MODEL_PREFIX) is required");
  if (f.epoch < 0) return bad(absl::StrCat("--epoch must be >= 0 (0 = newest), got ", f.epoch));
  if (f.port < 0 || f.port > 65535) return bad(absl::StrCat("--port must be in [0, 65535], got ", f.port));
  if (!(f.watch_interval_s >= 0)) {
    return bad(absl::StrCat("--watch-interval must be >= 0 (0 = off), got ", f.watch_interval_s));
  }
  if (f.max_batch < 1 || f.max_batch > (1 << 20)) {
    return bad(absl::StrCat("--max-batch must be in [1, 1048576], got ", f.max_batch));
  }
  if (f.threads < 0 || f.threads > 1024) return bad(absl::StrCat("--threads must be in [0, 1024], got ", f.threads));
  if (f.max_batch_size < 1 || f.max_batch_size > f.max_batch) {
    return bad(
        absl::StrCat("--max-batch-size must be in [1, --max-batch = ", f.max_batch, "], got ", f.max_batch_size));
  }
  if (f.max_batch_delay_us < 0 || f.max_batch_delay_us > 1000000) {
    return bad(absl::StrCat("--max-batch-delay-us must be in [0, 1000000], got ", f.max_batch_delay_us));
  }
  if (f.intra_op_threads < 1 || f.intra_op_threads > 1024) {
    return bad(absl::StrCat("--intra-op-threads must be in [1, 1024], got ", f.intra_op_threads));
  }
  if (!(f.wait_for_model_s >= 0)) return bad(absl::StrCat("--wait-for-model must be >= 0, got ", f.wait_for_model_s));
  return absl::OkStatus();
}

void SetServing(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
  health->SetServingStatus(serving);  // the "" service: the whole server
  health->SetServingStatus(kServiceName, serving);
  health->SetServingStatus(kOipServiceName, serving);
}

absl::Status ParseFlags(int argc, char** argv, InferFlags* f, bool* help) {
  FlagSet flags("dtrain-infer",
                "Serves a dtrain checkpoint for prediction over gRPC: dtrain.v1.Inference and the Open Inference "
                "Protocol (KServe v2, inference.GRPCInferenceService).");
  flags.AddString("model-prefix", &f->model_prefix, "checkpoint prefix: PREFIX-symbol.json, PREFIX-NNNN.params",
                  {"DTRAIN_MODEL_PREFIX"});
  flags.AddInt("epoch", &f->epoch, "epoch to serve; 0 = the newest complete one, reloading newer ones");
  flags.AddString("host", &f->host, "address to listen on (0.0.0.0: every interface, IPv6 too)", {"DTRAIN_BIND_HOST"});
  flags.AddInt("port", &f->port, "port to listen on (0 = any free port)", {"DTRAIN_PORT"});
  flags.AddString("port-file", &f->port_file, "write the bound port to this file (atomically) once listening");
  flags.AddDouble("watch-interval", &f->watch_interval_s, "seconds between looks for a newer epoch (0 = never)");
  flags.AddInt("max-batch", &f->max_batch, "largest Predict batch accepted");
  flags.AddInt("threads", &f->threads, "forward passes run at once (0 = one per core)");
  flags.AddInt("max-batch-size", &f->max_batch_size,
               "dynamic batching: images of queued requests run together in one forward, up to this many "
               "(1 = no batching; a larger request runs alone)");
  flags.AddInt("max-batch-delay-us", &f->max_batch_delay_us,
               "dynamic batching: longest the oldest queued request waits for others, in microseconds");
  flags.AddString("model-name", &f->model_name,
                  "the model's name in the Open Inference Protocol (default: --model-prefix's file name)");
  flags.AddInt("intra-op-threads", &f->intra_op_threads, "LibTorch threads inside one forward pass");
  flags.AddDouble("wait-for-model", &f->wait_for_model_s,
                  "seconds to wait for a first checkpoint (NOT_SERVING meanwhile) before giving up");
  metrics::AddMetricsFlags(flags, &f->metrics);
  AddTlsFlags(flags, &f->tls);
  flags.AddString("auth-token-file", &f->auth_token_file,
                  "bearer tokens accepted on Predict and ModelInfo, one a line (with --tls-ca, a client certificate "
                  "from that CA is accepted too); the health service stays open",
                  {"DTRAIN_AUTH_TOKEN_FILE"});
  absl::Status s = flags.Parse(argc, argv);
  *help = flags.help_requested();
  if (*help) {
    std::cout << flags.Usage();
    return absl::OkStatus();
  }
  if (s.ok()) s = CheckFlags(*f);
  if (s.ok()) s = metrics::CheckMetricsFlags(f->metrics);
  if (s.ok()) s = ApplyTlsFlags(f->tls, TlsUse::kInferenceServer, f->host);
  return s;
}

// Serves `services` (with health and reflection) on `host`:`port` and sets
// *bound_port, NOT_SERVING; null (logged) when it cannot listen.
std::unique_ptr<grpc::Server> StartServer(const std::string& host, int64_t port,
                                          const std::vector<grpc::Service*>& services, int* bound_port) {
  std::unique_ptr<grpc::Server> server =
      StartInferenceServer(JoinHostPort(host, static_cast<int>(port)), services, bound_port);
  if (server == nullptr) return nullptr;
  // The default health service starts out SERVING; there is no model yet.
  SetServing(*server, false);
  return server;
}

// Why the wait for a first model ended without one: the "stopping" line's reason,
// and the exit code.
struct EarlyStop {
  std::string why;
  int exit_code;
};

// Polls for a first checkpoint until one is loaded into `holder` (nullopt), the wait
// gives up (logged; exit 1) or a signal comes (exit 0).
std::optional<EarlyStop> WaitForFirstModel(CheckpointWatcher& watcher, const ModelHolder& holder,
                                           double wait_for_model_s, ShutdownSignal& signals) {
  const absl::Time give_up = absl::Now() + absl::Seconds(wait_for_model_s);
  absl::Time next_report = absl::Now();
  for (;;) {
    absl::StatusOr<bool> polled = watcher.Poll();
    if (holder.Get() != nullptr) return std::nullopt;
    const absl::Time now = absl::Now();
    if (now >= give_up) {
      DTRAIN_LOG(ERROR) << "no model to serve after waiting " << wait_for_model_s
                        << " s (--wait-for-model): " << polled.status().message();
      return EarlyStop{"no model", 1};
    }
    if (now >= next_report) {
      DTRAIN_LOG(WARNING) << "NOT_SERVING, waiting for a model: " << polled.status().message() << " (giving up in "
                          << absl::FormatDuration(absl::Trunc(give_up - now, absl::Seconds(1))) << ")";
      next_report = now + kWaitReportEvery;
    }
    const std::string sig = signals.WaitFor(std::min(kFirstModelPoll, give_up - now));
    if (!sig.empty()) return EarlyStop{sig, 0};
  }
}

// Health first, so balancers stop sending; then the calls already running finish;
// then the server closes at once (a grace period would only wait for idle clients) and
// the batcher answers what is still queued with UNAVAILABLE.
void Stop(const std::string& why, grpc::Server& server, const CallCounter& calls, BatchedForward& forward) {
  DTRAIN_LOG(INFO) << "stopping (" << why << ")";
  SetServing(server, false);
  if (!calls.Drain(kDrainTimeout)) {
    DTRAIN_LOG(WARNING) << "calls still running after " << kDrainTimeout << " are cancelled";
  }
  forward.Stop();
  server.Shutdown(DeadlineAfter(absl::ZeroDuration()));
}

// Process-wide threading: abseil's mutex deadlock detection off, LibTorch's threads per forward.
void ConfigureThreads(const InferFlags& f) {
  // Debian builds abseil without NDEBUG, which leaves absl::Mutex's deadlock detection
  // on: every lock and every mutex destroyed (gRPC makes several per call) updates a
  // process-wide lock graph under one global lock. A debugging aid, not a safety net:
  // off, as in abseil's release default.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  at::set_num_threads(static_cast<int>(f.intra_op_threads));
}

// Dynamic batching as the flags ask; --threads 0 runs one forward per core.
BatcherOptions MakeBatching(const InferFlags& f) {
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  BatcherOptions batching;
  batching.max_batch_size = f.max_batch_size;
  batching.max_delay = absl::Microseconds(f.max_batch_delay_us);
  batching.runners = f.threads > 0 ? static_cast<int>(f.threads) : cores;
  return batching;
}

// Who may call (--auth-token-file, client certificates with --tls-ca); warns when
// tokens would cross a network in plaintext.
absl::StatusOr<CallAuth> LoadAuth(const InferFlags& f) {
  absl::StatusOr<CallAuth> auth = CallAuth::Create(f.auth_token_file, /*client_certs=*/!f.tls.ca.empty());
  if (!auth.ok()) return auth;
  if (!f.auth_token_file.empty() && !TransportIsTls() && !IsLoopbackHost(f.host)) {
    DTRAIN_LOG(WARNING) << "bearer tokens over plaintext on " << f.host
                        << ": anyone on the path can read and reuse them; add --tls-cert and --tls-key";
  }
  return auth;
}

// What both protocols' services share; each pointer outlives the services.
struct SharedParts {
  BatchedForward* forward;
  CallCounter* calls;
  InferenceMetrics* metrics;  // null: metrics off
  CallAuth auth;
};

InferenceServiceOptions MakeServiceOptions(const InferFlags& f, const SharedParts& parts) {
  InferenceServiceOptions options;
  options.prefix = f.model_prefix;
  options.max_batch = f.max_batch;
  options.forward = parts.forward;
  options.calls = parts.calls;
  options.metrics = parts.metrics;
  options.auth = parts.auth;
  return options;
}

OpenInferenceOptions MakeOipOptions(const InferFlags& f, const SharedParts& parts) {
  OpenInferenceOptions oip;
  oip.prefix = f.model_prefix;
  oip.model_name = f.model_name.empty() ? DefaultModelName(f.model_prefix) : f.model_name;
  oip.max_batch = f.max_batch;
  oip.forward = parts.forward;
  oip.calls = parts.calls;
  oip.metrics = parts.metrics;
  oip.auth = parts.auth;
  return oip;
}

// Starts the server (NOT_SERVING) and writes --port-file; null (logged) on failure.
std::unique_ptr<grpc::Server> Listen(const InferFlags& f, const std::vector<grpc::Service*>& services, int* port) {
  std::unique_ptr<grpc::Server> server = StartServer(f.host, f.port, services, port);
  if (server == nullptr) return nullptr;
  if (!f.port_file.empty()) {
    if (absl::Status ps = WritePortFile(f.port_file, *port); !ps.ok()) {
      DTRAIN_LOG(ERROR) << ps.message();
      return nullptr;
    }
  }
  return server;
}

// Where the watcher looks for checkpoints; it reports each loaded epoch to the metrics.
WatcherOptions MakeWatch(const InferFlags& f, InferenceMetrics* families) {
  WatcherOptions watch;
  watch.prefix = f.model_prefix;
  watch.pinned_epoch = static_cast<int>(f.epoch);
  if (families != nullptr) {
    watch.on_loaded = [m = families](int epoch) { m->SetLoadedEpoch(epoch); };
  }
  return watch;
}

int Run(int argc, char** argv) {
  ShutdownSignal signals;  // first: every later thread inherits the blocked signals
  InferFlags f;
  bool help = false;
  if (absl::Status s = ParseFlags(argc, argv, &f, &help); !s.ok() || help) {
    if (!s.ok()) std::cerr << "dtrain-infer: " << s.message() << "\n";
    return s.ok() ? 0 : 2;
  }
  SetLogIdentity("infer", -1);
  ConfigureThreads(f);
  absl::StatusOr<metrics::RoleMetrics<InferenceMetrics>> metrics =
      metrics::StartRoleMetrics<InferenceMetrics>(f.metrics, "inference", /*rank=*/0);
  if (!metrics.ok()) {
    DTRAIN_LOG(ERROR) << metrics.status().message();
    return 1;
  }
  auto holder = std::make_shared<ModelHolder>();
  const BatcherOptions batching = MakeBatching(f);
  InferenceMetrics* families = metrics->families.get();
  DynamicBatcher::BatchObserver observer;
  if (families != nullptr) observer = [families](int jobs, int64_t rows) { families->BatchRan(jobs, rows); };
  BatchedForward forward(batching, std::move(observer));
  CallCounter calls;
  absl::StatusOr<CallAuth> auth = LoadAuth(f);
  if (!auth.ok()) {
    DTRAIN_LOG(ERROR) << auth.status().message();
    return 2;
  }
  const SharedParts parts{&forward, &calls, families, *std::move(auth)};
  const OpenInferenceOptions oip = MakeOipOptions(f, parts);
  InferenceService service(holder, MakeServiceOptions(f, parts));
  OpenInferenceService open_inference(holder, oip);

  int port = 0;
  std::unique_ptr<grpc::Server> server = Listen(f, {&service, &open_inference}, &port);
  if (server == nullptr) return 1;
  DTRAIN_LOG(INFO) << "listening on " << JoinHostPort(f.host, port) << " (NOT_SERVING until a model is loaded); "
                   << batching.runners << " forward(s) at once, " << f.intra_op_threads
                   << " LibTorch thread(s) each, max batch " << f.max_batch << "; batching up to " << f.max_batch_size
                   << " image(s) within " << f.max_batch_delay_us << " us; Open Inference Protocol model '"
                   << oip.model_name << "'";

  CheckpointWatcher watcher(MakeWatch(f, families), holder);
  if (std::optional<EarlyStop> early = WaitForFirstModel(watcher, *holder, f.wait_for_model_s, signals)) {
    Stop(early->why, *server, calls, forward);
    return early->exit_code;
  }
  SetServing(*server, true);
  const bool reloading = f.epoch == 0 && f.watch_interval_s > 0;
  DTRAIN_LOG(INFO) << "SERVING epoch " << holder->Get()->meta().epoch
                   << (reloading ? absl::StrCat("; looking for newer epochs every ", f.watch_interval_s, " s")
                                 : std::string("; reloading off"));
  if (reloading) watcher.Start(absl::Seconds(f.watch_interval_s));

  Stop(signals.Wait(), *server, calls, forward);
  watcher.Stop(absl::Seconds(2));
  return 0;
}

}  // namespace
}  // namespace dtrain::inference

int main(int argc, char** argv) { return dtrain::inference::Run(argc, argv); }
