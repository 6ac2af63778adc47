// Inference benchmark: latency (p50, p99) and throughput against a real dtrain-infer
// process on loopback, with C concurrent clients (one channel each), at each batch
// size, over each protocol (dtrain.v1 Predict, the Open Inference Protocol's
// ModelInfer with raw FP32 contents); and, in the same run on the same batches, a
// direct in-process LibTorch forward (uint8 -> float, forward, softmax, top-1) from the
// same number of client threads through the same number of forward slots and LibTorch
// threads as the server. The reference does not batch across clients: it is what a
// client gets calling LibTorch itself. The server batches concurrent requests
// (--max-batch-size, --max-batch-delay-us, passed through), which is how batch-1
// traffic can come near or past the reference despite gRPC, protobuf, validation and
// a process hop. Phases alternate over --trials (shared machines drift); medians are
// reported, one JSON line per batch size and protocol, with ratios served / direct.
// Each side's CPU time per image (this process and the server together) comes with
// it: on a shared machine the load moves throughput a lot and CPU per image little, and
// on an idle machine where both sides are CPU-bound the throughput ratio tends to
// 1 / cpu_ratio.
//
// usage: infer_bench --model-prefix DIR/m [--clients 8] [--batches 1,64] [--seconds 3]
//                    [--trials 3] [--threads 0] [--intra-op-threads 1] [--infer-bin PATH]
//                    [--protocols dtrain,oip] [--max-batch-size 8] [--max-batch-delay-us 500]
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/grpc_util.h"
#include "dtrain/v1/inference.grpc.pb.h"
#include "kserve/v2/grpc_predict_v2.grpc.pb.h"
#include "services/inference/forward_slots.h"
#include "common/checkpoint/checkpoint.h"
#include "common/data/idx_reader.h"
#include "common/models/models.h"

namespace {

struct Options {
  std::string infer_bin = std::string(DTRAIN_BIN_DIR) + "/dtrain-infer";
  std::string model_prefix;
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t clients = 8;
  std::string batches = "1,64";
  double seconds = 3;
  int64_t trials = 3;
  int64_t threads = 0;  // 0: one per core, as dtrain-infer
  int64_t intra_op_threads = 1;
  std::string protocols = "dtrain,oip";
  int64_t max_batch_size = 8;
  int64_t max_batch_delay_us = 500;
  std::string server_args;  // more dtrain-infer flags, space-separated
};

struct Result {
  double p50_ms = 0, p99_ms = 0, images_per_s = 0;
  // CPU time of this process and the server together per image: what each image costs
  // the machine, which a shared machine's load shifts far less than throughput.
  double cpu_ms_per_image = 0;
  int64_t calls = 0, failures = 0;
};

// CPU seconds (user + system, all threads) of this process, and of `pid` when > 0.
double CpuSeconds(pid_t pid) {
  struct rusage self;
  ::getrusage(RUSAGE_SELF, &self);
  double s = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
             static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  if (pid <= 0) return s;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) in parentheses: state is 3,
  // utime 14 and stime 15.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return s;
  std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ');
  if (f.size() < 13) return s;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return s + (std::stod(f[11]) + std::stod(f[12])) / ticks;
}

// Runs `call(client, i)` from `clients` threads for `seconds` after a short warm-up and
// collects per-call latencies, and the CPU time of this process and `server` meanwhile.
Result Measure(int clients, double seconds, int64_t batch, pid_t server,
               const std::function<bool(int client, int64_t i)>& call) {
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<int64_t> failures{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int64_t i = 0; !stop.load(); ++i) {
        const bool counted = measuring.load();
        const absl::Time t0 = absl::Now();
        const bool ok = call(c, i);
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
        if (!counted || stop.load()) continue;
        if (!ok) ++failures;
        latencies[static_cast<size_t>(c)].push_back(ms);
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // warm-up: threads, connections, allocator
  measuring.store(true);
  const absl::Time t0 = absl::Now();
  const double cpu0 = CpuSeconds(server);
  absl::SleepFor(absl::Seconds(seconds));
  stop.store(true);
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - t0);
  const double cpu = CpuSeconds(server) - cpu0;
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  Result r;
  r.calls = static_cast<int64_t>(all.size());
  r.failures = failures.load();
  if (all.empty()) return r;
  std::sort(all.begin(), all.end());
  r.p50_ms = all[all.size() / 2];
  r.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  r.images_per_s = static_cast<double>(r.calls * batch) / elapsed;
  r.cpu_ms_per_image = 1e3 * cpu / static_cast<double>(r.calls * batch);
  return r;
}

std::shared_ptr<dtrain::models::Network> LoadDirect(const std::string& prefix, int epoch) {
  auto symbol = dtrain::checkpoint::ReadSymbol(prefix);
  auto params = dtrain::checkpoint::ReadParams(dtrain::checkpoint::ParamsPath(prefix, epoch));
  if (!symbol.ok() || !params.ok()) return nullptr;
  auto net =
      dtrain::models::CreateNetwork(dtrain::models::NetworkSpec{symbol->network, symbol->hidden}, symbol->num_classes);
  if (!net.ok()) return nullptr;
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& p : (*net)->parameters()) {
    std::memcpy(p.data_ptr<float>(), (*params)[i++].data.data(), sizeof(float) * p.numel());
  }
  (*net)->eval();
  return *net;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Medians over trials, metric by metric.
Result MedianOf(const std::vector<Result>& rs) {
  Result m;
  std::vector<double> p50, p99, ips, cpu;
  for (const Result& r : rs) {
    p50.push_back(r.p50_ms);
    p99.push_back(r.p99_ms);
    ips.push_back(r.images_per_s);
    cpu.push_back(r.cpu_ms_per_image);
    m.calls += r.calls;
    m.failures += r.failures;
  }
  m.p50_ms = Median(p50);
  m.p99_ms = Median(p99);
  m.images_per_s = Median(ips);
  m.cpu_ms_per_image = Median(cpu);
  return m;
}

pid_t StartServer(const Options& o, const std::string& port_file) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string threads = std::to_string(o.threads), intra = std::to_string(o.intra_op_threads);
    const std::string max_size = std::to_string(o.max_batch_size), delay = std::to_string(o.max_batch_delay_us);
    std::vector<std::string> args = {o.infer_bin, "--model-prefix",   o.model_prefix, "--port",
                                     "0",         "--port-file",      port_file,      "--watch-interval",
                                     "0",         "--threads",        threads,        "--intra-op-threads",
                                     intra,       "--max-batch-size", max_size,       "--max-batch-delay-us",
                                     delay,       "--model-name",     "bench"};
    for (absl::string_view a : absl::StrSplit(o.server_args, ' ', absl::SkipEmpty())) args.emplace_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(o.infer_bin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  // As in dtrain-infer: Debian's abseil leaves absl::Mutex deadlock detection on, a
  // process-wide lock graph updated on every lock gRPC's client takes; the in-process
  // reference's forward slots pay it too. Off, so neither side measures a debugging aid.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Options o;
  dtrain::FlagSet flags("infer_bench", "dtrain-infer Predict latency/throughput vs in-process LibTorch");
  flags.AddString("infer-bin", &o.infer_bin, "dtrain-infer binary");
  flags.AddString("model-prefix", &o.model_prefix, "checkpoint to serve (its newest epoch)");
  flags.AddString("data-dir", &o.data_dir, "where t10k-images-idx3-ubyte.gz is");
  flags.AddInt("clients", &o.clients, "concurrent clients");
  flags.AddString("batches", &o.batches, "batch sizes, comma-separated");
  flags.AddDouble("seconds", &o.seconds, "measured seconds per phase");
  flags.AddInt("trials", &o.trials, "alternating direct/served trials per batch size; medians reported");
  flags.AddInt("threads", &o.threads, "dtrain-infer --threads (forwards at once; 0 = cores), also used direct");
  flags.AddInt("intra-op-threads", &o.intra_op_threads, "LibTorch threads per forward (server and reference)");
  flags.AddString("protocols", &o.protocols, "served protocols to measure: dtrain (Predict), oip (ModelInfer)");
  flags.AddInt("max-batch-size", &o.max_batch_size, "dtrain-infer --max-batch-size (1: no dynamic batching)");
  flags.AddInt("max-batch-delay-us", &o.max_batch_delay_us, "dtrain-infer --max-batch-delay-us");
  flags.AddString("server-args", &o.server_args, "more dtrain-infer flags, space-separated (e.g. --metrics-port 9400)");
  std::vector<int64_t> batches;
  absl::Status s = flags.Parse(argc, argv);
  if (s.ok()) s = dtrain::ParseIntList(o.batches, &batches);
  const std::vector<std::string> protocols = absl::StrSplit(o.protocols, ',', absl::SkipEmpty());
  for (const std::string& p : protocols) {
    if (s.ok() && p != "dtrain" && p != "oip") s = absl::InvalidArgumentError("--protocols: dtrain or oip, got " + p);
  }
  if (s.ok() && o.model_prefix.empty()) s = absl::InvalidArgumentError("--model-prefix is required");
  if (!s.ok()) {
    std::fprintf(stderr, "infer_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  auto epoch = dtrain::checkpoint::NewestCompleteEpoch(o.model_prefix);
  auto images = dtrain::data::ReadIdx(o.data_dir + "/t10k-images-idx3-ubyte.gz");
  if (!epoch.ok() || !images.ok()) {
    std::fprintf(stderr, "infer_bench: %s\n",
                 std::string((!epoch.ok() ? epoch.status() : images.status()).message()).c_str());
    return 1;
  }
  auto net = LoadDirect(o.model_prefix, *epoch);
  if (net == nullptr) {
    std::fprintf(stderr, "infer_bench: cannot load %s epoch %d\n", o.model_prefix.c_str(), *epoch);
    return 1;
  }
  at::set_num_threads(static_cast<int>(o.intra_op_threads));
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int forward_slots = o.threads > 0 ? static_cast<int>(o.threads) : cores;

  char dir[] = "/tmp/dtrain-infer-bench-XXXXXX";
  ::mkdtemp(dir);
  const std::string port_file = std::string(dir) + "/port";
  const pid_t pid = StartServer(o, port_file);
  int port = 0;
  for (int i = 0; i < 1200 && port == 0; ++i) {  // 30 s
    std::ifstream in(port_file);
    if (!(in >> port)) absl::SleepFor(absl::Milliseconds(25));
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);
  std::vector<std::unique_ptr<dtrain::v1::Inference::Stub>> stubs;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> oip_stubs;
  for (int64_t c = 0; c < o.clients; ++c) {
    auto channel = dtrain::MakeChannel(address);
    stubs.push_back(dtrain::v1::Inference::NewStub(channel));
    oip_stubs.push_back(inference::GRPCInferenceService::NewStub(channel));
  }
  bool ready = false;
  for (int i = 0; port != 0 && i < 300 && !ready; ++i) {  // 30 s for the model
    grpc::ClientContext ctx;
    ctx.set_deadline(dtrain::DeadlineAfter(absl::Seconds(1)));
    dtrain::v1::ModelInfoResponse info;
    ready = stubs[0]->ModelInfo(&ctx, dtrain::v1::ModelInfoRequest(), &info).ok();
    if (!ready) absl::SleepFor(absl::Milliseconds(100));
  }
  if (!ready) {
    std::fprintf(stderr, "infer_bench: %s did not start serving\n", o.infer_bin.c_str());
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return 1;
  }

  const int64_t total = static_cast<int64_t>(images->data.size() / 784);
  int exit_code = 0;
  for (int64_t batch : batches) {
    // The same distinct batches for both sides: client c's call i sends batch (c + i * C).
    const int64_t distinct = std::max<int64_t>(1, total / batch);
    auto batch_bytes = [&](int c, int64_t i) {
      const int64_t k = (c + i * o.clients) % distinct;
      return std::string_view(reinterpret_cast<const char*>(images->data.data()) + k * batch * 784,
                              static_cast<size_t>(batch * 784));
    };
    dtrain::inference::ForwardSlots slots(forward_slots);
    auto direct_call = [&](int c, int64_t i) {
      // As the server's forward threads do (LoadedModel::Forward): LibTorch's thread
      // count for OpenMP, which OpenBLAS follows, not every core behind each call.
      [[maybe_unused]] thread_local const bool threads_held = (at::init_num_threads(), true);
      auto lease = slots.Acquire(absl::InfiniteFuture());
      c10::InferenceMode guard;
      std::string_view bytes = batch_bytes(c, i);
      auto x = torch::from_blob(const_cast<char*>(bytes.data()), {batch, 1, 28, 28}, torch::kUInt8)
                   .to(torch::kFloat32)
                   .div_(255.0f);
      auto top = torch::softmax(net->forward(x), 1).topk(1, 1);
      return std::get<1>(top).size(0) == batch;
    };
    auto served_call = [&](int c, int64_t i) {
      dtrain::v1::PredictRequest req;
      req.set_pixel_type(dtrain::v1::PIXEL_TYPE_UINT8);
      for (int64_t d : {batch, int64_t{28}, int64_t{28}}) req.add_shape(d);
      std::string_view bytes = batch_bytes(c, i);
      req.set_data(bytes.data(), bytes.size());
      grpc::ClientContext ctx;
      ctx.set_deadline(dtrain::DeadlineAfter(absl::Seconds(30)));
      dtrain::v1::PredictResponse resp;
      return stubs[static_cast<size_t>(c)]->Predict(&ctx, req, &resp).ok() && resp.predictions_size() == batch;
    };
    // The Open Inference Protocol with the same pixels as FP32 raw contents (x / 255,
    // converted once here, as a client would hold them).
    std::vector<float> as_floats(images->data.size());
    for (size_t i = 0; i < as_floats.size(); ++i) as_floats[i] = static_cast<float>(images->data[i]) / 255.0f;
    auto oip_call = [&](int c, int64_t i) {
      inference::ModelInferRequest req;
      req.set_model_name("bench");
      auto* in = req.add_inputs();
      in->set_name("images");
      in->set_datatype("FP32");
      for (int64_t d : {batch, int64_t{1}, int64_t{28}, int64_t{28}}) in->add_shape(d);
      const int64_t k = (c + i * o.clients) % distinct;
      req.add_raw_input_contents(reinterpret_cast<const char*>(as_floats.data() + k * batch * 784),
                                 static_cast<size_t>(batch * 784) * sizeof(float));
      req.add_outputs()->set_name("probabilities");
      grpc::ClientContext ctx;
      ctx.set_deadline(dtrain::DeadlineAfter(absl::Seconds(30)));
      inference::ModelInferResponse resp;
      return oip_stubs[static_cast<size_t>(c)]->ModelInfer(&ctx, req, &resp).ok() && resp.outputs_size() == 1 &&
             resp.outputs(0).shape_size() == 2 && resp.outputs(0).shape(0) == batch;
    };
    std::vector<Result> directs;
    std::vector<std::vector<Result>> serveds(protocols.size());
    for (int64_t t = 0; t < o.trials; ++t) {
      directs.push_back(Measure(static_cast<int>(o.clients), o.seconds, batch, pid, direct_call));
      for (size_t p = 0; p < protocols.size(); ++p) {
        serveds[p].push_back(Measure(static_cast<int>(o.clients), o.seconds, batch, pid,
                                     protocols[p] == "oip" ? std::function<bool(int, int64_t)>(oip_call)
                                                           : std::function<bool(int, int64_t)>(served_call)));
      }
    }
    const Result direct = MedianOf(directs);
    for (size_t p = 0; p < protocols.size(); ++p) {
      const Result served = MedianOf(serveds[p]);
      if (served.failures > 0 || served.calls == 0) exit_code = 1;
      std::printf(
          "{\"batch\": %lld, \"clients\": %lld, \"protocol\": \"%s\", \"max_batch_size\": %lld, "
          "\"max_batch_delay_us\": %lld, \"served\": {\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"images_per_s\": %.1f, "
          "\"cpu_ms_per_image\": %.3f, \"calls\": %lld, \"failures\": %lld}, \"direct\": {\"p50_ms\": %.3f, "
          "\"p99_ms\": %.3f, \"images_per_s\": %.1f, \"cpu_ms_per_image\": %.3f}, \"p50_ratio\": %.2f, "
          "\"p99_ratio\": %.2f, \"throughput_ratio\": %.3f, \"cpu_ratio\": %.3f}\n",
          static_cast<long long>(batch), static_cast<long long>(o.clients), protocols[p].c_str(),
          static_cast<long long>(o.max_batch_size), static_cast<long long>(o.max_batch_delay_us), served.p50_ms,
          served.p99_ms, served.images_per_s, served.cpu_ms_per_image, static_cast<long long>(served.calls),
          static_cast<long long>(served.failures), direct.p50_ms, direct.p99_ms, direct.images_per_s,
          direct.cpu_ms_per_image, served.p50_ms / direct.p50_ms, served.p99_ms / direct.p99_ms,
          served.images_per_s / direct.images_per_s, served.cpu_ms_per_image / direct.cpu_ms_per_image);
      std::fflush(stdout);
    }
  }
  oip_stubs.clear();
  stubs.clear();
  ::kill(pid, SIGTERM);
  int status = 0;
  for (int i = 0; i < 100 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) absl::SleepFor(absl::Milliseconds(100));
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::remove(port_file.c_str());
  ::rmdir(dir);
  return exit_code;
}
