// TLS transport benchmark: push + pull of a 64 MB model (4 MB keys) between this
// process (worker::PsClients, --connections of them per server for TLS, as the worker's
// --connections-per-server spreads its keys) and two standalone dtrain-server processes
// on loopback, one plaintext and one with mutual TLS (a CA made here), alternating
// trials in the same run. The target: TLS at >= 0.8x the plaintext rate.
//
// usage: tls_bench [--server-bin PATH] [--mb 64] [--rounds 5] [--trials 5]
//                  [--connections N[,N...]] [--plain-connections N]
// Prints one JSON line with both rates (GB/s of payload), their ratio, and the CPU
// seconds both ends spent per GB moved (what bounds the rate when the cores are shared).
// Several --connections counts are measured in the same alternating trials (a TLS
// server each), and listed under "tls_by_connections"; the top-level TLS figures are
// the first count's; likewise --plain-connections, the ratios being to its first.
#include <sys/resource.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/credentials.h"
#include "common/flags.h"
#include "common/kv/placement.h"
#include "common/malloc_tuning.h"
#include "common/tls/cert_authority.h"
#include "services/worker/kv/striped_channel.h"

namespace {

using dtrain::worker::ServerChannel;

struct Server {
  pid_t pid = -1;
  std::string address;
};

// A standalone dtrain-server with `extra` flags; empty address when it did not start.
Server StartServer(const std::string& bin, const std::string& port_file, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {bin,         "--standalone", "--host", "127.0.0.1",   "--bind-host",
                                   "127.0.0.1", "--port",       "0",      "--port-file", port_file};
  args.insert(args.end(), extra.begin(), extra.end());
  Server s;
  s.pid = ::fork();
  if (s.pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int port = 0;
  for (int i = 0; i < 400 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) absl::SleepFor(absl::Milliseconds(25));
  }
  if (port != 0) s.address = absl::StrCat("127.0.0.1:", port);
  return s;
}

void Stop(Server& s) {
  if (s.pid <= 0) return;
  ::kill(s.pid, SIGTERM);
  ::waitpid(s.pid, nullptr, 0);
}

// CPU seconds (user + system) process `pid` used so far; 0 when unreadable.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  double ticks = 0;
  // Fields 3.. of proc(5): utime and stime are the 14th and 15th.
  for (int i = 3; i <= 15 && (fields >> f); ++i) {
    if (i >= 14) ticks += std::stod(f);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double SelfCpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One client's model, placed on its one server.
struct Model {
  std::unique_ptr<ServerChannel> client;
  dtrain::kv::Placement placement;
  std::vector<float> weights, grads;
  int64_t step = 0;

  absl::Status Init(int64_t elems) {
    placement = dtrain::kv::ComputePlacement({elems}, 1);
    weights.assign(elems, 0.5f);
    grads.assign(elems, 0.001f);
    dtrain::kv::OptimizerOptions sgd;
    sgd.learning_rate = 0.01;
    std::vector<dtrain::kv::KeyState> keys;
    for (const auto& s : placement.slices) {
      keys.push_back({s.key,
                      {s.length},
                      0,
                      std::vector<float>(weights.begin() + s.offset, weights.begin() + s.offset + s.length),
                      {}});
    }
    absl::Status ok = client->Configure(dtrain::KVStoreMode::kDistSync, 1, sgd, absl::Seconds(30));
    if (ok.ok()) ok = client->InitKeys(keys, absl::Seconds(60));
    if (ok.ok()) ok = Round();  // warm-up
    return ok;
  }
  absl::Status Round() {
    for (const auto& s : placement.slices) {
      client->Submit(dtrain::worker::KeyRequest::PushPull(step, s.key, grads.data() + s.offset,
                                                          weights.data() + s.offset, s.length));
    }
    ++step;
    return client->WaitAll(absl::Now() + absl::Seconds(120));
  }
  // GB/s of payload (both directions) over `rounds` rounds; adds the CPU seconds this
  // process and `server` spent per GB to *cpu_per_gb.
  absl::StatusOr<double> Measure(int64_t rounds, pid_t server, std::vector<double>* cpu_per_gb) {
    const double cpu0 = SelfCpuSeconds() + ProcessCpuSeconds(server);
    const absl::Time t0 = absl::Now();
    for (int64_t r = 0; r < rounds; ++r) {
      if (absl::Status s = Round(); !s.ok()) return s;
    }
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
    const double gb = 2.0 * static_cast<double>(weights.size()) * 4 * rounds / 1e9;
    cpu_per_gb->push_back((SelfCpuSeconds() + ProcessCpuSeconds(server) - cpu0) / gb);
    return gb / secs;
  }
};

// One thing measured: a server and this process's model on it.
struct Arm {
  std::string name;  // "plaintext", "tls"
  int connections = 1;
  Server server;
  Model model;
  std::vector<double> rates, cpu;
};

int Fail(const std::string& what, std::vector<Arm>& arms) {
  std::fprintf(stderr, "tls_bench: %s\n", what.c_str());
  for (Arm& a : arms) Stop(a.server);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  dtrain::TuneMallocForBulkTransfers();
  std::string server_bin = std::string(DTRAIN_BIN_DIR) + "/dtrain-server";
  int64_t mb = 64, rounds = 5, trials = 5;
  std::string connections = std::to_string(dtrain::worker::DefaultConnectionsPerServer(true));
  std::string plain_connections = std::to_string(dtrain::worker::DefaultConnectionsPerServer(false));
  dtrain::FlagSet flags("tls_bench", "push+pull GB/s with mutual TLS vs plaintext");
  flags.AddString("server-bin", &server_bin, "dtrain-server binary");
  flags.AddInt("mb", &mb, "model size in MB");
  flags.AddInt("rounds", &rounds, "push+pull rounds per trial");
  flags.AddInt("trials", &trials, "alternating plaintext/TLS trials; medians are reported");
  flags.AddString("connections", &connections,
                  "TLS connections to the server, over which the keys are spread; a comma list measures each");
  flags.AddString("plain-connections", &plain_connections,
                  "plaintext connections to the server; a comma list measures each (ratios are to the first)");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  std::vector<Arm> arms;
  for (const auto& [name, list] : {std::pair<std::string, std::string>{"plaintext", plain_connections},
                                   std::pair<std::string, std::string>{"tls", connections}}) {
    for (absl::string_view c : absl::StrSplit(list, ',')) {
      int n = 0;
      if (!absl::SimpleAtoi(c, &n) || n < 1) {
        std::fprintf(stderr, "--%s: %s is not a list of counts >= 1\n",
                     name == "tls" ? "connections" : "plain-connections", list.c_str());
        return 2;
      }
      arms.emplace_back().name = name;
      arms.back().connections = n;
    }
  }
  const size_t first_tls = std::count_if(arms.begin(), arms.end(), [](const Arm& a) { return a.name != "tls"; });
  char dir[] = "/tmp/dtrain-tls-bench-XXXXXX";
  ::mkdtemp(dir);
  struct RemoveDir {
    std::string path;
    ~RemoveDir() { std::filesystem::remove_all(path); }
  } cleanup{dir};
  auto ca = dtrain::tls::CertAuthority::Create("bench", absl::Hours(1));
  if (!ca.ok()) return 1;
  for (dtrain::Role role : {dtrain::Role::kServer, dtrain::Role::kWorker}) {
    const char* who = dtrain::RoleName(role);
    auto kc = ca->Issue(dtrain::tls::LeafName(role, 0, "bench"), {}, absl::Hours(1));
    if (!kc.ok() || !dtrain::tls::WriteKeyAndCert(dir, who, *kc).ok()) return 1;
  }
  if (!dtrain::tls::WriteKeyAndCert(dir, "ca", ca->ca()).ok()) return 1;
  const std::string d = dir;
  for (size_t i = 0; i < arms.size(); ++i) {
    const std::string port_file = absl::StrCat(d, "/", i, ".port");
    arms[i].server =
        i < first_tls
            ? StartServer(server_bin, port_file, {"--insecure"})
            : StartServer(server_bin, port_file,
                          {"--tls-cert", d + "/server.crt", "--tls-key", d + "/server.key", "--tls-ca", d + "/ca.crt"});
    if (arms[i].server.address.empty()) return Fail("a dtrain-server did not start", arms);
  }

  // Channels take the process's transport when made: the plaintext one first.
  const int64_t elems = mb * (1 << 20) / 4;
  for (size_t i = 0; i < arms.size(); ++i) {
    if (i == first_tls) {
      dtrain::TransportSecurity security;
      security.tls = true;
      security.ca_pem = ca->ca().cert_pem;
      auto worker = ca->Issue(dtrain::tls::LeafName(dtrain::Role::kWorker, 0, "bench"), {}, absl::Hours(1));
      security.cert_pem = worker->cert_pem;
      security.key_pem = worker->key_pem;
      dtrain::SetTransportSecurity(security);
    }
    auto c = dtrain::worker::ConnectPsClients(0, arms[i].server.address, 0, absl::Seconds(10), arms[i].connections);
    if (!c.ok()) return Fail(std::string(c.status().message()), arms);
    arms[i].model.client = *std::move(c);
    if (absl::Status s = arms[i].model.Init(elems); !s.ok()) {
      return Fail(absl::StrCat(arms[i].name, ": ", s.message()), arms);
    }
  }

  // Shared machines drift: rotate which goes first, and take medians.
  for (int64_t trial = 0; trial < trials; ++trial) {
    for (size_t k = 0; k < arms.size(); ++k) {
      Arm& a = arms[(trial + k) % arms.size()];
      absl::StatusOr<double> rate = a.model.Measure(rounds, a.server.pid, &a.cpu);
      if (!rate.ok()) return Fail(std::string(rate.status().message()), arms);
      a.rates.push_back(*rate);
    }
  }
  for (Arm& a : arms) {
    a.model.client.reset();
    Stop(a.server);
  }
  const double plain_gbps = Median(arms[0].rates);
  std::string plain_by, tls_by;
  for (const Arm& a : arms) {
    std::string& by = a.name == "tls" ? tls_by : plain_by;
    absl::StrAppendFormat(&by, "%s{\"connections\": %d, \"GBps\": %.3f, \"ratio\": %.3f, \"cpu_s_per_GB\": %.2f}",
                          by.empty() ? "" : ", ", a.connections, Median(a.rates), Median(a.rates) / plain_gbps,
                          Median(a.cpu));
  }
  const Arm& t = arms[first_tls];
  std::printf(
      "{\"model_mb\": %lld, \"rounds\": %lld, \"trials\": %lld, \"plain_connections\": %d, "
      "\"tls_connections\": %d, \"plaintext_push_pull_GBps\": %.3f, \"tls_push_pull_GBps\": %.3f, "
      "\"ratio\": %.3f, \"target\": 0.8, \"plaintext_cpu_s_per_GB\": %.2f, \"tls_cpu_s_per_GB\": %.2f, "
      "\"plain_by_connections\": [%s], \"tls_by_connections\": [%s]}\n",
      static_cast<long long>(mb), static_cast<long long>(rounds), static_cast<long long>(trials), arms[0].connections,
      t.connections, plain_gbps, Median(t.rates), Median(t.rates) / plain_gbps, Median(arms[0].cpu), Median(t.cpu),
      plain_by.c_str(), tls_by.c_str());
  return 0;
}
