// Mutual TLS with real processes over real sockets: who the scheduler and servers let
// in, and a `dtrain launch --tls` job that trains to the same weights as a plaintext
// one while attackers knock.
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/credentials.h"
#include "common/file_io.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/security/tls_peer.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(8);

std::string WaitForPortFile(const std::string& path, Subprocess& p) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up && p.running()) {
    absl::StatusOr<std::string> text = ReadFileLimited(path, 64);
    int port = 0;
    if (text.ok() && absl::SimpleAtoi(*text, &port) && port > 0) return absl::StrCat("127.0.0.1:", port);
    absl::SleepFor(absl::Milliseconds(50));
  }
  return "";
}

// The three ways in without the job's credentials; each must fail before any RPC runs.
struct Attacker {
  std::string name;
  std::shared_ptr<grpc::ChannelCredentials> creds;
};

std::vector<Attacker> Attackers(const std::string& job_ca_dir, const std::string& other_dir) {
  return {
      {"plaintext client", grpc::InsecureChannelCredentials()},
      // Trusts the job's CA (it could have read ca.crt) but has no certificate.
      {"client without a certificate", ChannelCredentialsFor(TlsFrom(job_ca_dir, "", ""))},
      // A certificate of the right shape and name, from another CA.
      {"client with another CA's certificate", ChannelCredentialsFor(TlsFrom(job_ca_dir, other_dir, "client"))},
  };
}

void ExpectRefused(const grpc::Status& s, const std::string& who, const std::string& target) {
  EXPECT_FALSE(s.ok()) << who << " got into " << target;
  // A refused handshake reads UNAVAILABLE on the client: the call never reached the service.
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << who << " at " << target << ": " << s.error_message();
}

TEST(TlsTest, SchedulerAdmitsOnlyCertificatesFromItsCa) {
  const std::string dir = MakeTempDir();
  MakeCerts(dir + "/job", "tls-test", 1, 1);
  MakeCerts(dir + "/other", "tls-test", 1, 1);
  const std::string job = dir + "/job";
  Subprocess scheduler({Bin("dtrain-scheduler"), "--host", "127.0.0.1", "--port", "0", "--port-file", dir + "/port",
                        "--num-workers", "1", "--num-servers", "1", "--register-timeout", "60", "--tls-cert",
                        job + "/scheduler-0.crt", "--tls-key", job + "/scheduler-0.key", "--tls-ca", job + "/ca.crt"});
  const std::string address = WaitForPortFile(dir + "/port", scheduler);
  ASSERT_FALSE(address.empty()) << scheduler.output();

  // The control: the job's operator certificate gets an answer. A certificate of the
  // job's CA for something else (a client of the inference service) gets through the
  // handshake but may not read the job's state (docs/security.md).
  const grpc::Status good = CallScheduler(address, ChannelCredentialsFor(TlsFrom(job, job, "operator")));
  EXPECT_TRUE(good.ok()) << good.error_message();
  const grpc::Status client = CallScheduler(address, ChannelCredentialsFor(TlsFrom(job, job, "client")));
  EXPECT_EQ(client.error_code(), grpc::StatusCode::PERMISSION_DENIED) << client.error_message();
  for (const Attacker& a : Attackers(job, dir + "/other")) {
    ExpectRefused(CallScheduler(address, a.creds), a.name, "the scheduler");
  }
  // A node must not trust an impostor scheduler either: with only another CA trusted,
  // the job's real scheduler is refused by the client.
  const grpc::Status wrong_root =
      CallScheduler(address, ChannelCredentialsFor(TlsFrom(dir + "/other", dir + "/other", "client")));
  ExpectRefused(wrong_root, "client trusting another CA", "the scheduler");

  // `dtrain status` speaks TLS with the operator's certificate, and fails without one.
  auto [status_code, status_out] =
      RunToEnd({Bin("dtrain"), "status", "--scheduler", address, "--tls-ca", job + "/ca.crt", "--tls-cert",
                job + "/operator.crt", "--tls-key", job + "/operator.key"},
               absl::Seconds(30));
  EXPECT_EQ(status_code, 0) << status_out;
  auto [client_code, client_out] =
      RunToEnd({Bin("dtrain"), "status", "--scheduler", address, "--tls-ca", job + "/ca.crt", "--tls-cert",
                job + "/client.crt", "--tls-key", job + "/client.key", "--timeout", "2"},
               absl::Seconds(30));
  EXPECT_NE(client_code, 0) << client_out;
  EXPECT_NE(client_out.find("operator"), std::string::npos) << "the refusal should say what is needed: " << client_out;
  auto [plain_code, plain_out] =
      RunToEnd({Bin("dtrain"), "status", "--scheduler", address, "--timeout", "2"}, absl::Seconds(30));
  EXPECT_NE(plain_code, 0) << plain_out;

  // Unharmed: it still answers its own.
  EXPECT_TRUE(scheduler.running()) << scheduler.output();
  EXPECT_TRUE(CallScheduler(address, ChannelCredentialsFor(TlsFrom(job, job, "operator"))).ok());
  scheduler.Signal(SIGTERM);
  EXPECT_EQ(scheduler.Wait(absl::Seconds(20)), 0) << scheduler.output();
}

TEST(TlsTest, BadTlsFlagsAreStartupErrorsNamingTheFile) {
  const std::string dir = MakeTempDir();
  MakeCerts(dir + "/job", "tls-test", 1, 1);
  MakeCerts(dir + "/other", "tls-test", 1, 1);
  const std::string job = dir + "/job";
  auto run = [&](std::vector<std::string> tls) {
    std::vector<std::string> argv = {Bin("dtrain-scheduler"), "--host", "127.0.0.1", "--port", "0"};
    argv.insert(argv.end(), tls.begin(), tls.end());
    return RunToEnd(argv, absl::Seconds(20));
  };
  {
    auto [code, out] = run({"--tls-cert", job + "/scheduler-0.crt", "--tls-key", job + "/scheduler-0.key"});
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("--tls-ca"), std::string::npos) << out;
  }
  {
    auto [code, out] = run({"--tls-cert", dir + "/other/scheduler-0.crt", "--tls-key", dir + "/other/scheduler-0.key",
                            "--tls-ca", job + "/ca.crt"});
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("does not verify against --tls-ca " + job + "/ca.crt"), std::string::npos) << out;
  }
  {
    auto [code, out] =
        run({"--tls-cert", job + "/scheduler-0.crt", "--tls-key", job + "/server-0.key", "--tls-ca", job + "/ca.crt"});
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("is not the key of the certificate"), std::string::npos) << out;
  }
  {
    auto [code, out] = run({"--insecure", "--tls-ca", job + "/ca.crt"});
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("--insecure with"), std::string::npos) << out;
  }
  {
    auto [code, out] =
        run({"--tls-cert", dir + "/missing.crt", "--tls-key", job + "/scheduler-0.key", "--tls-ca", job + "/ca.crt"});
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("--tls-cert: cannot open " + dir + "/missing.crt"), std::string::npos) << out;
  }
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TlsTest, PlaintextBeyondLoopbackWarnsOnceAtStart) {
  const std::string warning = "plaintext gRPC on 0.0.0.0 (beyond loopback)";
  // The scheduler gives up on registration after a second either way; only the listen address differs.
  for (const std::vector<std::string>& extra : {std::vector<std::string>{}, std::vector<std::string>{"--insecure"}}) {
    std::vector<std::string> argv = {Bin("dtrain-scheduler"), "--host", "0.0.0.0", "--port", "0",
                                     "--register-timeout",    "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto [code, out] = RunToEnd(argv, absl::Seconds(20));
    EXPECT_EQ(code, 1) << out;
    EXPECT_EQ(Count(out, warning), 1u) << out;
  }
  auto [code, out] = RunToEnd(
      {Bin("dtrain-scheduler"), "--host", "127.0.0.1", "--port", "0", "--register-timeout", "1"}, absl::Seconds(20));
  EXPECT_EQ(code, 1) << out;
  EXPECT_EQ(out.find("plaintext gRPC"), std::string::npos) << "loopback only: no warning\n" << out;
}

TEST(TlsTest, CertsWritesPrivateKeysAndReusesItsCa) {
  const std::string dir = MakeTempDir() + "/certs";
  MakeCerts(dir, "j", 2, 1);
  for (const char* stem : {"ca", "scheduler-0", "server-0", "worker-0", "worker-1", "client"}) {
    const auto key = std::filesystem::status(absl::StrCat(dir, "/", stem, ".key"));
    ASSERT_TRUE(std::filesystem::exists(key)) << stem;
    EXPECT_EQ(key.permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
        << stem << ".key must be 0600";
  }
  const std::string ca = *ReadFileLimited(dir + "/ca.crt", 1 << 20);
  MakeCerts(dir, "j", 3, 1);  // a third worker joins: same CA
  EXPECT_EQ(*ReadFileLimited(dir + "/ca.crt", 1 << 20), ca);
  EXPECT_TRUE(std::filesystem::exists(dir + "/worker-2.crt"));
  // No temp file left behind by the atomic writes.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
}

// The quickstart recipe at the size the brief fixes (-n 2 -s 2 lenet, 6000 examples,
// seed 7), with and without --tls: the same accuracy and the same final weights, bit
// for bit, while three attackers knock at the scheduler and a server of the --tls job.
TEST(TlsTest, LaunchTlsTrainsTheSameWeightsWhileAttackersAreRefused) {
  const std::string dir = MakeTempDir();
  MakeCerts(dir + "/other", "local", 2, 2);
  const std::vector<std::string> recipe = {"--network",      "lenet", "--num-epochs", "1",
                                           "--num-examples", "6000",  "--seed",       "7"};
  auto launch = [&](bool tls) {
    std::vector<std::string> argv = {Bin("dtrain"), "launch", "-n", "2", "-s", "2"};
    if (tls) argv.push_back("--tls");
    argv.push_back("--");
    argv.insert(argv.end(), recipe.begin(), recipe.end());
    return argv;
  };
  // A TMPDIR of its own, so the launch's private directory is the only one in it.
  const std::string launch_tmp = dir + "/launch-tmp";
  std::filesystem::create_directory(launch_tmp);
  Subprocess job(launch(true), {{"TMPDIR", launch_tmp}});
  ASSERT_TRUE(job.WaitForOutput("mutual TLS on every connection", absl::Seconds(30))) << job.output();
  ASSERT_TRUE(job.WaitForOutput("[server 1]", absl::Seconds(60))) << job.output();
  std::smatch m;
  const std::string so_far = job.output();
  ASSERT_TRUE(std::regex_search(so_far, m, std::regex("scheduler at (127\\.0\\.0\\.1:[0-9]+)"))) << so_far;
  const std::string scheduler = m[1];
  // The attackers have the throwaway CA's certificate (the worst case: it is public
  // information); the launch's private directory is the one in its TMPDIR.
  std::string ca_dir;
  for (const auto& e : std::filesystem::directory_iterator(launch_tmp)) {
    if (e.path().filename().string().rfind("dtrain-launch-", 0) == 0 &&
        std::filesystem::exists(e.path() / "tls" / "ca.crt")) {
      ca_dir = (e.path() / "tls").string();
    }
  }
  ASSERT_FALSE(ca_dir.empty()) << "no dtrain-launch-*/tls/ca.crt under " << launch_tmp;
  for (const Attacker& a : Attackers(ca_dir, dir + "/other")) {
    ExpectRefused(CallScheduler(scheduler, a.creds), a.name, "the scheduler");
  }
  // A server: its address from its "listening on" line, once it is up.
  std::string server;
  for (absl::Time give_up = absl::Now() + absl::Seconds(60); server.empty() && absl::Now() < give_up;) {
    const std::string out = job.output();
    if (std::regex_search(out, m, std::regex("\\[server 0\\][^\\n]*listening on (127\\.0\\.0\\.1:[0-9]+)"))) {
      server = m[1];
    } else {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  ASSERT_FALSE(server.empty()) << job.output();
  for (const Attacker& a : Attackers(ca_dir, dir + "/other"))
    ExpectRefused(CallServer(server, a.creds), a.name, "server 0");

  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  EXPECT_FALSE(std::filesystem::exists(ca_dir)) << "dtrain launch --tls left its CA directory behind";
  const auto tls_fnv = ValuesAfter(job.output(), "weights-fnv64", "Training done");
  const auto tls_acc = ValuesAfter(job.output(), "Validation-accuracy", "Training done");
  ASSERT_EQ(tls_fnv.size(), 2u) << job.output();
  EXPECT_EQ(tls_fnv[0], tls_fnv[1]);

  auto [code, plain] = RunToEnd(launch(false), kRunTimeout);
  ASSERT_EQ(code, 0) << plain;
  EXPECT_EQ(ValuesAfter(plain, "weights-fnv64", "Training done"), tls_fnv) << "TLS changed what was trained";
  EXPECT_EQ(ValuesAfter(plain, "Validation-accuracy", "Training done"), tls_acc);
  std::printf("weights-fnv64 with --tls: %s (plaintext: the same)\n", tls_fnv[0].c_str());
}

}  // namespace
}  // namespace dtrain::testing
