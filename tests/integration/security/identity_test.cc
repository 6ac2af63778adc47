// Identity bound to rank (docs/security.md): a `dtrain launch --tls` job with
// restarts, attacked by holders of valid certificates of its own CA, trains to the same
// weights as an uninterrupted plaintext run. The attacks are the ones that worked on
// the plaintext cluster: acting as another rank, Leave and heartbeats in another
// node's name, NaN pushes in another worker's name, a hijacked Configure, GetStatus
// and GetState without rights, and a token stolen from an incarnation that was replaced.
#include <signal.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/auth/node_token.h"
#include "common/credentials.h"
#include "common/file_io.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"
#include "tests/integration/security/node_attacks.h"
#include "tests/integration/security/tls_peer.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(6);
constexpr absl::Duration kLineTimeout = absl::Minutes(3);

// The recovery chaos tests' job (ChaosRecipe), with --tls and restarts.
std::vector<std::string> Argv(const std::string& prefix) {
  return ChaosRecipe(prefix, {"--kv-store", "dist_sync", "--tls", "--max-restarts", "3", "--restart-backoff", "0.1"});
}

std::string Match(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? m[1].str() : "";
}

void ExpectCode(const grpc::Status& s, grpc::StatusCode want, const std::string& attack) {
  EXPECT_EQ(s.error_code(), want) << attack << ": " << s.error_code() << " " << s.error_message();
}

TEST(IdentityTest, ValidCertificatesCannotActAsAnotherNodeAndTheJobEndsUnharmed) {
  const std::string ref = ChaosReference(kRunTimeout);
  ASSERT_FALSE(ref.empty());

  const std::string dir = MakeTempDir();
  const std::string launch_tmp = dir + "/launch-tmp";
  std::filesystem::create_directory(launch_tmp);
  Subprocess job(Argv(dir + "/m"), {{"TMPDIR", launch_tmp}});
  ASSERT_NE(WaitForLine(job, "[worker 1]", "Epoch[0] Batch [2]", kLineTimeout), std::string::npos) << job.output();
  const std::string out = job.output();
  const std::string scheduler = Match(out, "scheduler at (127\\.0\\.0\\.1:[0-9]+)");
  const std::string server0 = Match(out, "\\[server 0\\][^\\n]*listening on (127\\.0\\.0\\.1:[0-9]+)");
  const std::string tls = Match(out, "operator certificate for dtrain status while it runs: ([^\\n]*)/operator");
  ASSERT_FALSE(scheduler.empty() || server0.empty() || tls.empty()) << out;

  // Each attacker holds a certificate the job's CA really issued.
  const Creds as_worker0 = ChannelCredentialsFor(TlsFrom(tls, tls, "worker-0"));
  const Creds as_worker1 = ChannelCredentialsFor(TlsFrom(tls, tls, "worker-1"));
  const Creds as_server0 = ChannelCredentialsFor(TlsFrom(tls, tls, "server-0"));
  const Creds as_operator = ChannelCredentialsFor(TlsFrom(tls, tls, "operator"));
  // The tokens the scheduler issued to the first incarnations: a token is a MAC under
  // a key derived from the scheduler's private key (which is in the directory too), so
  // these are byte for byte what the workers hold: what a thief would have.
  absl::StatusOr<std::string> scheduler_key = ReadFileLimited(tls + "/scheduler-0.key", 1 << 16);
  ASSERT_TRUE(scheduler_key.ok()) << scheduler_key.status();
  const std::string key = auth::DeriveTokenKey(*scheduler_key);
  const std::string worker0_token = auth::MintToken(key, {Role::kWorker, 0, 1});
  const std::string worker1_token = auth::MintToken(key, {Role::kWorker, 1, 1});

  // The scheduler.
  ExpectCode(RegisterAs(scheduler, as_worker1, v1::ROLE_WORKER, 0), grpc::StatusCode::PERMISSION_DENIED,
             "worker 1's certificate registering as worker 0");
  ExpectCode(RegisterAs(scheduler, as_operator, v1::ROLE_SERVER, 1), grpc::StatusCode::PERMISSION_DENIED,
             "the operator's certificate registering as a server");
  ExpectCode(LeaveAs(scheduler, as_worker1, "", v1::ROLE_WORKER, 0, 1), grpc::StatusCode::UNAUTHENTICATED,
             "Leave(worker 0, failed) without a token");
  ExpectCode(LeaveAs(scheduler, as_worker1, worker1_token, v1::ROLE_WORKER, 0, 1), grpc::StatusCode::PERMISSION_DENIED,
             "Leave(worker 0, failed) with worker 1's token");
  ExpectCode(HeartbeatAs(scheduler, as_worker0, worker0_token, v1::ROLE_WORKER, 1, 1),
             grpc::StatusCode::PERMISSION_DENIED, "a heartbeat in worker 1's name (its stream's end would kill it)");
  std::string forged = worker1_token;
  forged.replace(0, 8, "worker.0");  // worker 1's MAC on worker 0's claims
  ExpectCode(LeaveAs(scheduler, as_worker1, forged, v1::ROLE_WORKER, 0, 1), grpc::StatusCode::UNAUTHENTICATED,
             "Leave with a token whose rank was edited");
  ExpectCode(GetStatusWith(scheduler, as_server0, ""), grpc::StatusCode::PERMISSION_DENIED,
             "GetStatus with a node's certificate but no token");
  ExpectCode(GetStatusWith(scheduler, as_operator, ""), grpc::StatusCode::OK, "GetStatus as the operator");

  // A parameter server.
  ExpectCode(PushNanAs(server0, as_worker1, worker1_token, 0, 1), grpc::StatusCode::PERMISSION_DENIED,
             "a NaN push in worker 0's name on worker 1's stream");
  ExpectCode(PushNanAs(server0, as_worker1, "", 1, 1), grpc::StatusCode::UNAUTHENTICATED, "a NaN push without a token");
  ExpectCode(ConfigureWith(server0, as_worker1, worker1_token), grpc::StatusCode::PERMISSION_DENIED,
             "Configure (lr 100) by worker 1");
  int keys = 0;
  ExpectCode(GetStateWith(server0, as_server0, "", &keys), grpc::StatusCode::PERMISSION_DENIED,
             "GetState with a node's certificate but no token");
  EXPECT_EQ(keys, 0) << "weights left the server";
  ExpectCode(GetStateWith(server0, as_operator, "", &keys), grpc::StatusCode::OK, "GetState as the operator");
  EXPECT_GT(keys, 0);

  // Worker 1 dies and is replaced (incarnation 2): its first incarnation's token is dead.
  const pid_t victim = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(victim, 0) << job.output();
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ASSERT_NE(WaitForLine(job, "[worker 1]", "caught up: step", kLineTimeout), std::string::npos) << job.output();
  ExpectCode(LeaveAs(scheduler, as_worker1, worker1_token, v1::ROLE_WORKER, 1, 1),
             grpc::StatusCode::FAILED_PRECONDITION, "Leave with the replaced incarnation's token");
  ExpectCode(LeaveAs(scheduler, as_worker1, worker1_token, v1::ROLE_WORKER, 1, 2), grpc::StatusCode::PERMISSION_DENIED,
             "Leave as incarnation 2 with incarnation 1's token");
  ExpectCode(HeartbeatAs(scheduler, as_worker1, worker1_token, v1::ROLE_WORKER, 1, 2),
             grpc::StatusCode::PERMISSION_DENIED, "a heartbeat as incarnation 2 with incarnation 1's token");
  ExpectCode(PushNanAs(server0, as_worker1, worker1_token, 1, 1), grpc::StatusCode::FAILED_PRECONDITION,
             "a NaN push with the replaced incarnation's token");
  ExpectCode(GetStatusWith(scheduler, as_worker1, worker1_token), grpc::StatusCode::PERMISSION_DENIED,
             "GetStatus with the replaced incarnation's token");

  // Unharmed: the same weights, bit for bit, as the uninterrupted plaintext run.
  ASSERT_EQ(job.Wait(kRunTimeout), 0) << job.output();
  const std::vector<std::string> got = FinalWeights(job.output());
  ASSERT_EQ(got.size(), 2u) << job.output();
  EXPECT_EQ(got[0], ref);
  EXPECT_EQ(got[1], ref);
  // Each refusal was logged naming the peer's address.
  EXPECT_NE(job.output().find("refused a call from ipv4:127.0.0.1:"), std::string::npos) << job.output();
}

}  // namespace
}  // namespace dtrain::testing
