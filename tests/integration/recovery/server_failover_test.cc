// Chaos test of server failover (docs/recovery.md, "Servers: replication and
// failover"): a 2-worker, 3-server dist_sync job with --replication 2 under `dtrain
// launch --max-restarts` loses a server to SIGKILL at a seeded random moment (mid
// step: some of a step's pushes sent, some answered); the launcher restarts it, the
// workers go on with the other replica of its ranges, and the run ends with exit 0 and
// the final weights of an uninterrupted run without replication, bit for bit.
//
// The moment comes from DTRAIN_CHAOS_SEED (default 1); run_chaos.sh loops over seeds.
// Prints the recovery time (kill to the next completed step) as "recovery time: ...".
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"
#include "tests/integration/recovery/launched_job.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(6);
constexpr absl::Duration kLineTimeout = absl::Minutes(3);
// 3000 examples over 2 workers at batch 64: 23 steps per epoch.
constexpr int kBatches = 23;

// 3 servers; replication 1 without restarts is the reference.
std::vector<std::string> Argv(const std::string& prefix, int replication, bool restarts) {
  return FailoverRecipe(prefix, 3, replication, restarts);
}

std::string BatchLine(int epoch, int batch) { return absl::StrCat("Epoch[", epoch, "] Batch [", batch, "]"); }

// The same job without replication and without failures (SharedReference).
std::string Reference() {
  return SharedReference("server-failover-reference", Argv(MakeTempDir() + "/ref", 1, false), 2, kRunTimeout);
}

TEST(ServerFailoverChaosTest, ServerKilledMidStepEndsBitIdentical) {
  const std::vector<std::string> ref = {Reference()};
  ASSERT_FALSE(ref[0].empty());

  std::mt19937_64 rng(ChaosSeed() * 1000003 + 101);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int victim = uniform(0, 2);
  const int epoch = uniform(0, 1);
  const int batch = uniform(1, kBatches - 2);
  const int delay_ms = uniform(0, 30);

  Subprocess job(Argv(MakeTempDir() + "/m", 2, true));
  const size_t at = WaitForLine(job, "[worker 0]", BatchLine(epoch, batch), kLineTimeout);
  ASSERT_NE(at, std::string::npos) << job.output();
  absl::SleepFor(absl::Milliseconds(delay_ms));
  const pid_t pid = FindLaunchedChild(job.pid(), "server", victim);
  ASSERT_GT(pid, 0) << "no server " << victim << " among the launcher's children";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  std::cout << "seed " << ChaosSeed() << ": SIGKILL to server " << victim << " " << delay_ms << " ms after \""
            << BatchLine(epoch, batch) << "\"" << std::endl;

  // Recovery: worker 0 notices (its stream to the server breaks) and completes a step.
  const size_t noticed = WaitForLine(job, "[worker 0]", "failover: server", kLineTimeout, at);
  ASSERT_NE(noticed, std::string::npos) << job.output();
  const size_t stepped = WaitForLine(job, "[worker 0]", "] Batch [", kLineTimeout, noticed);
  ASSERT_NE(stepped, std::string::npos) << job.output();
  const double recovery = absl::ToDoubleSeconds(absl::Now() - killed);
  std::cout << absl::StrFormat("recovery time: %.2f s (kill to worker 0's next completed step)", recovery) << std::endl;
  ::testing::Test::RecordProperty("recovery_seconds", absl::StrFormat("%.2f", recovery));

  const int code = job.Wait(kRunTimeout);
  const std::string& out = job.output();
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> got = FinalWeights(out);
  ASSERT_EQ(got.size(), 2u) << out;
  EXPECT_EQ(got[0], ref[0]) << out;
  EXPECT_EQ(got[1], ref[0]) << out;
  EXPECT_NE(out.find(absl::StrCat("restarting server ", victim, " (1 of 3): killed by signal 9")), std::string::npos)
      << out;
}

// The restarted server gets its keys copied while training goes on and rejoins their
// chains; then the other member of its home range is killed, so that range lives on the
// newcomer alone: the run still ends bit-identical, which it could not if the copy (or
// the step the newcomer joined at) were off by anything.
TEST(ServerFailoverChaosTest, RestartedServerRejoinsThenItsPartnerIsKilled) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  std::mt19937_64 rng(ChaosSeed() * 1000003 + 202);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int first = uniform(0, 2);
  const int partner = (first + 1) % 3;  // the chain of `first`'s range is [first, partner]
  const int batch = uniform(1, 5);

  Subprocess job(Argv(MakeTempDir() + "/m", 2, true));
  size_t at = WaitForLine(job, "[worker 0]", BatchLine(0, batch), kLineTimeout);
  ASSERT_NE(at, std::string::npos) << job.output();
  absl::SleepFor(absl::Milliseconds(uniform(0, 30)));
  pid_t pid = FindLaunchedChild(job.pid(), "server", first);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  std::cout << "seed " << ChaosSeed() << ": SIGKILL to server " << first << " after \"" << BatchLine(0, batch) << "\""
            << std::endl;
  // The partner copied every key of the range to the restarted server...
  at = WaitForLine(job, absl::StrCat("[server ", partner, "]"),
                   absl::StrCat("server ", first, " holds every key of ours in its chains again"), kLineTimeout, at);
  ASSERT_NE(at, std::string::npos) << job.output();
  std::cout << absl::StrFormat("rejoin time: %.2f s (kill to the restarted server holding its range)",
                               absl::ToDoubleSeconds(absl::Now() - killed))
            << std::endl;
  // ... and both workers went through a step since, so they push to it.
  for (int w = 0; w < 2; ++w) {
    const std::string who = absl::StrCat("[worker ", w, "]");
    size_t seen = at;
    for (int k = 0; k < 2; ++k) {
      seen = WaitForLine(job, who, "] Batch [", kLineTimeout, seen);
      ASSERT_NE(seen, std::string::npos) << job.output();
    }
  }
  pid = FindLaunchedChild(job.pid(), "server", partner);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  std::cout << "seed " << ChaosSeed() << ": SIGKILL to server " << partner << " (the range's other replica)"
            << std::endl;

  const int code = job.Wait(kRunTimeout);
  const std::string& out = job.output();
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> got = FinalWeights(out);
  ASSERT_EQ(got.size(), 2u) << out;
  EXPECT_EQ(got[0], ref) << out;
  EXPECT_EQ(got[1], ref) << out;
  EXPECT_NE(out.find(absl::StrCat("is back in the chain of key")), std::string::npos) << out;
}

// The restarted server is killed again while its partners copy it their keys (the
// analogue of "killed while it forwards": answers are held for the copy). Whatever the
// copy's fate, the job goes on at the partners, the second replacement is copied in,
// and the run ends bit-identical.
TEST(ServerFailoverChaosTest, RestartedServerKilledAgainWhileBeingCopiedTo) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  std::mt19937_64 rng(ChaosSeed() * 1000003 + 404);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int victim = uniform(0, 2);
  const int partner = (victim + 1) % 3;
  const int batch = uniform(1, 5);

  Subprocess job(Argv(MakeTempDir() + "/m", 2, true));
  size_t at = WaitForLine(job, "[worker 0]", BatchLine(0, batch), kLineTimeout);
  ASSERT_NE(at, std::string::npos) << job.output();
  pid_t pid = FindLaunchedChild(job.pid(), "server", victim);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // The partner hears of the replacement and copies at the keys' next version.
  at = WaitForLine(job, absl::StrCat("[server ", partner, "]"), absl::StrCat("server ", victim, " restarted at "),
                   kLineTimeout, at);
  ASSERT_NE(at, std::string::npos) << job.output();
  const int delay_ms = uniform(0, 40);
  absl::SleepFor(absl::Milliseconds(delay_ms));
  pid = FindLaunchedChild(job.pid(), "server", victim);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  std::cout << "seed " << ChaosSeed() << ": SIGKILL to server " << victim << " after \"" << BatchLine(0, batch)
            << "\", and to its replacement " << delay_ms << " ms after its partner started copying" << std::endl;
  // The second replacement gets the range.
  ASSERT_NE(
      WaitForLine(job, absl::StrCat("[server ", partner, "]"),
                  absl::StrCat("server ", victim, " holds every key of ours in its chains again"), kLineTimeout, at),
      std::string::npos)
      << job.output();
  const int code = job.Wait(kRunTimeout);
  const std::string& out = job.output();
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> got = FinalWeights(out);
  ASSERT_EQ(got.size(), 2u) << out;
  EXPECT_EQ(got[0], ref) << out;
  EXPECT_EQ(got[1], ref) << out;
  EXPECT_NE(out.find(absl::StrCat("restarting server ", victim, " (2 of 3)")), std::string::npos) << out;
}

// Worker recovery still holds with replication: a worker killed mid-step
// rejoins, reads versions from every replica and redoes its step on all of them.
TEST(ServerFailoverChaosTest, WorkerKilledMidStepWithReplication) {
  const std::string ref = Reference();
  ASSERT_FALSE(ref.empty());
  std::mt19937_64 rng(ChaosSeed() * 1000003 + 303);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int epoch = uniform(0, 1);
  const int batch = uniform(1, kBatches - 2);
  Subprocess job(Argv(MakeTempDir() + "/m", 2, true));
  const size_t at = WaitForLine(job, "[worker 1]", BatchLine(epoch, batch), kLineTimeout);
  ASSERT_NE(at, std::string::npos) << job.output();
  absl::SleepFor(absl::Milliseconds(uniform(0, 30)));
  const pid_t pid = FindLaunchedChild(job.pid(), "worker", 1);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_NE(WaitForLine(job, "[worker 1]", "caught up: step", kLineTimeout, at), std::string::npos) << job.output();
  const int code = job.Wait(kRunTimeout);
  const std::string& out = job.output();
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> got = FinalWeights(out);
  ASSERT_EQ(got.size(), 2u) << out;
  EXPECT_EQ(got[0], ref) << out;
  EXPECT_EQ(got[1], ref) << out;
}

}  // namespace
}  // namespace dtrain::testing
