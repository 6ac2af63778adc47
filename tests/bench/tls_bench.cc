// TLS transport benchmark: push + pull of a 64 MB model (4 MB keys) between this
// process (worker::PsClient) and two standalone dtrain-server processes on loopback,
// one plaintext and one with mutual TLS (a CA made here), alternating trials in the
// same run. The target: TLS at >= 0.6x the plaintext rate.
//
// usage: tls_bench [--server-bin PATH] [--mb 64] [--rounds 5] [--trials 5]
// Prints one JSON line with both rates (GB/s of payload) and their ratio.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/credentials.h"
#include "common/flags.h"
#include "common/kv/placement.h"
#include "common/malloc_tuning.h"
#include "common/tls/cert_authority.h"
#include "services/worker/kv/ps_client.h"

namespace {

using dtrain::worker::PsClient;

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

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One client's model, placed on its one server.
struct Model {
  std::unique_ptr<PsClient> client;
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
  // GB/s of payload (both directions) over `rounds` rounds.
  absl::StatusOr<double> Measure(int64_t rounds) {
    const absl::Time t0 = absl::Now();
    for (int64_t r = 0; r < rounds; ++r) {
      if (absl::Status s = Round(); !s.ok()) return s;
    }
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
    return 2.0 * static_cast<double>(weights.size()) * 4 * rounds / secs / 1e9;
  }
};

int Fail(const std::string& what, Server& a, Server& b) {
  std::fprintf(stderr, "tls_bench: %s\n", what.c_str());
  Stop(a);
  Stop(b);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  dtrain::TuneMallocForBulkTransfers();
  std::string server_bin = std::string(DTRAIN_BIN_DIR) + "/dtrain-server";
  int64_t mb = 64, rounds = 5, trials = 5;
  dtrain::FlagSet flags("tls_bench", "push+pull GB/s with mutual TLS vs plaintext");
  flags.AddString("server-bin", &server_bin, "dtrain-server binary");
  flags.AddInt("mb", &mb, "model size in MB");
  flags.AddInt("rounds", &rounds, "push+pull rounds per trial");
  flags.AddInt("trials", &trials, "alternating plaintext/TLS trials; medians are reported");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
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
  Server plain = StartServer(server_bin, d + "/plain.port", {"--insecure"});
  Server tls =
      StartServer(server_bin, d + "/tls.port",
                  {"--tls-cert", d + "/server.crt", "--tls-key", d + "/server.key", "--tls-ca", d + "/ca.crt"});
  if (plain.address.empty() || tls.address.empty()) return Fail("a dtrain-server did not start", plain, tls);

  // Channels take the process's transport when made: one client each way.
  const int64_t elems = mb * (1 << 20) / 4;
  Model p, t;
  auto pc = PsClient::Connect(plain.address, 0, 0, absl::Seconds(10));
  if (!pc.ok()) return Fail(std::string(pc.status().message()), plain, tls);
  p.client = *std::move(pc);
  dtrain::TransportSecurity security;
  security.tls = true;
  security.ca_pem = ca->ca().cert_pem;
  auto worker = ca->Issue(dtrain::tls::LeafName(dtrain::Role::kWorker, 0, "bench"), {}, absl::Hours(1));
  security.cert_pem = worker->cert_pem;
  security.key_pem = worker->key_pem;
  dtrain::SetTransportSecurity(security);
  auto tc = PsClient::Connect(tls.address, 0, 0, absl::Seconds(10));
  if (!tc.ok()) return Fail(std::string(tc.status().message()), plain, tls);
  t.client = *std::move(tc);
  if (absl::Status s = p.Init(elems); !s.ok()) return Fail(absl::StrCat("plaintext: ", s.message()), plain, tls);
  if (absl::Status s = t.Init(elems); !s.ok()) return Fail(absl::StrCat("TLS: ", s.message()), plain, tls);

  // Shared machines drift: alternate which goes first, and take medians.
  std::vector<double> plain_rates, tls_rates;
  for (int64_t trial = 0; trial < trials; ++trial) {
    for (int k = 0; k < 2; ++k) {
      const bool tls_now = (trial + k) % 2 == 1;
      absl::StatusOr<double> rate = (tls_now ? t : p).Measure(rounds);
      if (!rate.ok()) return Fail(std::string(rate.status().message()), plain, tls);
      (tls_now ? tls_rates : plain_rates).push_back(*rate);
    }
  }
  p.client.reset();
  t.client.reset();
  Stop(plain);
  Stop(tls);
  const double plain_gbps = Median(plain_rates), tls_gbps = Median(tls_rates);
  std::printf(
      "{\"model_mb\": %lld, \"rounds\": %lld, \"trials\": %lld, \"plaintext_push_pull_GBps\": %.3f, "
      "\"tls_push_pull_GBps\": %.3f, \"ratio\": %.3f, \"target\": 0.6}\n",
      static_cast<long long>(mb), static_cast<long long>(rounds), static_cast<long long>(trials), plain_gbps, tls_gbps,
      tls_gbps / plain_gbps);
  return 0;
}
