// Transport benchmark: push + pull of a 64 MB model (cut into 4 MB keys) between one
// worker (this process, worker::PsClient) and one dtrain-server process on loopback,
// against a plain TCP socket moving the same bytes both ways in the same run.
//
// usage: transport_bench [--server-bin PATH] [--mb 64] [--keys 0] [--rounds 10] [--trials 5]
// Prints one JSON line with both rates (GB/s of payload), their ratio and the time of one
// push+pull round. --keys N cuts the model into N equal keys instead of 4 MB ones: a small
// model of many layers (ResNet-20: 1.09 MB in 65 keys) is bound by what each key costs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/malloc_tuning.h"
#include "common/flags.h"
#include "common/kv/placement.h"
#include "services/worker/kv/ps_client.h"

namespace {

using dtrain::worker::PsClient;

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, 0);
    if (w <= 0) std::abort();
    p += w;
    n -= static_cast<size_t>(w);
  }
}
void ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) std::abort();
    p += r;
    n -= static_cast<size_t>(r);
  }
}

// A loopback echo of `bytes` per round in 4 MB pieces: the bytes a push+pull moves.
double TcpGbps(size_t bytes, int rounds) {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  ::listen(ls, 1);
  constexpr size_t kPiece = 4 << 20;
  std::thread echo([&] {
    int c = ::accept(ls, nullptr, nullptr);
    std::vector<char> buf(kPiece);
    for (int r = 0; r < rounds; ++r) {
      for (size_t off = 0; off < bytes; off += kPiece) {
        ReadAll(c, buf.data(), kPiece);
        WriteAll(c, buf.data(), kPiece);
      }
    }
    ::close(c);
  });
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) std::abort();
  std::vector<char> out(kPiece, 1), in(kPiece);
  const absl::Time t0 = absl::Now();
  for (int r = 0; r < rounds; ++r) {
    for (size_t off = 0; off < bytes; off += kPiece) {
      WriteAll(s, out.data(), kPiece);
      ReadAll(s, in.data(), kPiece);
    }
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
  ::close(s);
  echo.join();
  ::close(ls);
  return 2.0 * static_cast<double>(bytes) * rounds / secs / 1e9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  dtrain::TuneMallocForBulkTransfers();
  std::string server_bin = std::string(DTRAIN_BIN_DIR) + "/dtrain-server";
  int64_t mb = 64, rounds = 10, trials = 5, num_keys = 0;
  dtrain::FlagSet flags("transport_bench", "push+pull GB/s vs a plain TCP stream");
  flags.AddString("server-bin", &server_bin, "dtrain-server binary");
  flags.AddInt("mb", &mb, "model size in MB");
  flags.AddInt("keys", &num_keys, "cut the model into this many equal keys; 0: 4 MB keys");
  flags.AddInt("rounds", &rounds, "push+pull rounds per trial");
  flags.AddInt("trials", &trials, "alternating dtrain/TCP trials; medians are reported");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  char dir[] = "/tmp/dtrain-bench-XXXXXX";
  ::mkdtemp(dir);
  const std::string port_file = std::string(dir) + "/port";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(server_bin.c_str(), server_bin.c_str(), "--standalone", "--port", "0", "--port-file", port_file.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int port = 0;
  for (int i = 0; i < 400 && port == 0; ++i) {
    std::ifstream in(port_file);
    if (!(in >> port)) absl::SleepFor(absl::Milliseconds(25));
  }
  if (port == 0) {
    std::fprintf(stderr, "dtrain-server did not start\n");
    ::kill(pid, SIGKILL);
    return 1;
  }
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto client = PsClient::Connect(address, 0, 0, absl::Seconds(10));
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  const int64_t elems = mb * (1 << 20) / 4;
  const auto placement = num_keys > 0
                             ? dtrain::kv::ComputePlacement(std::vector<int64_t>(num_keys, elems / num_keys), 1)
                             : dtrain::kv::ComputePlacement({elems}, 1);
  std::vector<float> weights(elems, 0.5f), grads(elems, 0.001f);
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
  auto ok = (*client)->Configure(dtrain::KVStoreMode::kDistSync, 1, sgd, absl::Seconds(30));
  if (ok.ok()) ok = (*client)->InitKeys(keys, absl::Seconds(60));
  auto round = [&](int64_t step) {
    for (const auto& s : placement.slices) {
      (*client)->Submit(dtrain::worker::KeyRequest::PushPull(step, s.key, grads.data() + s.offset,
                                                             weights.data() + s.offset, s.length));
    }
    return (*client)->WaitAll(absl::Now() + absl::Seconds(60));
  };
  if (ok.ok()) ok = round(0);  // warm-up
  // Shared 2-core machines drift: alternate the two measurements and take medians.
  std::vector<double> dtrain_rates, tcp_rates;
  int64_t step = 1;
  for (int64_t trial = 0; ok.ok() && trial < trials; ++trial) {
    const absl::Time t0 = absl::Now();
    for (int64_t r = 0; ok.ok() && r < rounds; ++r) ok = round(step++);
    const double secs = absl::ToDoubleSeconds(absl::Now() - t0);
    dtrain_rates.push_back(2.0 * static_cast<double>(elems) * 4 * rounds / secs / 1e9);
    tcp_rates.push_back(TcpGbps(static_cast<size_t>(elems) * 4, static_cast<int>(rounds)));
  }
  client->reset();  // close the stream first, so the server stops at once
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  if (!ok.ok()) {
    std::fprintf(stderr, "push/pull failed: %s\n", std::string(ok.message()).c_str());
    return 1;
  }
  const double dtrain_gbps = Median(dtrain_rates), tcp_gbps = Median(tcp_rates);
  std::printf(
      "{\"model_mb\": %lld, \"rounds\": %lld, \"trials\": %lld, \"dtrain_push_pull_GBps\": %.3f, "
      "\"tcp_GBps\": %.3f, \"ratio\": %.3f, \"keys\": %zu, \"round_ms\": %.3f}\n",
      static_cast<long long>(mb), static_cast<long long>(rounds), static_cast<long long>(trials), dtrain_gbps, tcp_gbps,
      dtrain_gbps / tcp_gbps, placement.slices.size(), 2.0 * static_cast<double>(elems) * 4 / dtrain_gbps / 1e6);
  return 0;
}
