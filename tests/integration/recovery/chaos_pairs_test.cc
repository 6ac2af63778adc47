// Two faults at once (docs/recovery.md, "Two faults at once"): a job under `dtrain
// launch --max-restarts` loses two processes about half a second apart — the scheduler
// and a worker, the scheduler and a server, two workers, a worker and a server, two
// servers of three with --replication 3 — at seeded moments: mid-epoch, during start-up,
// during worker 0's checkpoint save, while a rollback to the servers' snapshots is under
// way, and while a restarted server is being copied its range. Every run must end with
// exit 0 and the uninterrupted run's final weights, bit for bit. Where survival is
// impossible (both replicas of a range lost, no snapshots) the job must fail at once,
// naming the range.
//
// Each scenario prints "recovery time: S s" from the first kill to a surviving worker's
// next committed step (tests/bench/recovery_time.sh gathers them into percentiles).
// The moments come from DTRAIN_CHAOS_SEED (default 1); run_chaos.sh loops over seeds.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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
// Every recipe here: 3000 examples over 2 workers at batch 64, 23 steps an epoch.
constexpr int kBatches = 23;
// The gap between the two kills: a node that dies takes the scheduler with it well
// inside one heartbeat, before anyone has noticed the first death.
constexpr int kGapMs = 500;

// The jobs, each with the uninterrupted run it must match.
enum class Shape {
  kPlain,        // 2 workers, 2 servers
  kReplicated,   // 2 workers, 3 servers, --replication 2 (the failover recipe)
  kReplicated3,  // 2 workers, 3 servers, --replication 3
  kSnapshots,    // 2 workers, 2 servers, --snapshot-every 50 (the rollback recipe)
};

std::vector<std::string> Argv(Shape shape) {
  const std::string prefix = MakeTempDir() + "/m";
  switch (shape) {
    // The failover recipe (6 epochs) leaves room for a second kill half a second after
    // the first; with 2 servers its reference is the plain pairs' own.
    case Shape::kPlain: return FailoverRecipe(prefix, 2, 1, true);
    case Shape::kReplicated: return FailoverRecipe(prefix, 3, 2, true);
    case Shape::kReplicated3: return FailoverRecipe(prefix, 3, 3, true);
    case Shape::kSnapshots: return SnapshotRecipe(prefix, true);
  }
  return {};
}

std::string Reference(Shape shape) {
  switch (shape) {
    case Shape::kPlain:
      return SharedReference("pairs-reference", FailoverRecipe(MakeTempDir() + "/ref", 2, 1, false), 2, kRunTimeout);
    case Shape::kReplicated:
    case Shape::kReplicated3:
      // Replication changes where keys live, never the weights.
      return SharedReference("server-failover-reference", FailoverRecipe(MakeTempDir() + "/ref", 3, 1, false), 2,
                             kRunTimeout);
    case Shape::kSnapshots:
      return SharedReference("snapshot-reference", SnapshotRecipe(MakeTempDir() + "/ref", false), 2, kRunTimeout);
  }
  return "";
}

std::string BatchLine(int epoch, int batch) { return absl::StrCat("Epoch[", epoch, "] Batch [", batch, "]"); }

// The step of a "[worker N] ... Epoch[E] Batch [B]" line, or -1.
int StepOf(absl::string_view line) {
  const size_t e = line.find("Epoch[");
  const size_t b = line.find("] Batch [");
  if (e == absl::string_view::npos || b == absl::string_view::npos || b < e) return -1;
  int epoch = 0, batch = 0;
  const size_t b_end = line.find(']', b + 9);
  if (b_end == absl::string_view::npos || !absl::SimpleAtoi(line.substr(e + 6, b - e - 6), &epoch) ||
      !absl::SimpleAtoi(line.substr(b + 9, b_end - b - 9), &batch)) {
    return -1;
  }
  return epoch * kBatches + batch;
}

// The newest step `who` logged in output[from, to).
int LastStep(const std::string& out, const std::string& who, size_t to) {
  int last = -1;
  size_t pos = 0;
  while (pos < to) {
    size_t eol = out.find('\n', pos);
    if (eol == std::string::npos || eol > to) break;
    absl::string_view line(out.data() + pos, eol - pos);
    if (absl::StartsWith(line, who)) last = std::max(last, StepOf(line));
    pos = eol + 1;
  }
  return last;
}

// When a "[worker 0] 2026-11-27 10:30:12.036 I ..." line was logged (common/log.cc's
// format, local time); the infinite past when it does not parse.
absl::Time LineTime(absl::string_view line) {
  const size_t b = line.find("] ");
  absl::Time t = absl::InfinitePast();
  std::string err;
  if (b == absl::string_view::npos || line.size() < b + 2 + 23 ||
      !absl::ParseTime("%Y-%m-%d %H:%M:%E3S", std::string(line.substr(b + 2, 23)), absl::LocalTimeZone(), &t, &err)) {
    return absl::InfinitePast();
  }
  return t;
}

// One kill: `role` `rank` gets SIGKILL `delay` ms after `who` logs `text` (after the
// previous kill's moment), or `delay` ms after the previous kill when `text` is empty.
// An empty `role` kills nobody: the shot only waits for its line.
struct Shot {
  std::string role;
  int rank = 0;
  std::string who;
  std::string text;
  int delay_ms = 0;
};

std::string Name(const Shot& s) { return absl::StrCat(s.role, " ", s.rank); }

class Pair {
 public:
  Pair(Shape shape, int scenario) : shape_(shape), rng_(ChaosSeed() * 1000003 + 5000 + scenario) {}

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  // A seeded batch line of worker 0 in epoch 0 or 1, away from the epochs' ends.
  Shot MidEpoch(const std::string& role, int rank) {
    const int epoch = Uniform(0, 1);
    return {role, rank, "[worker 0]", BatchLine(epoch, Uniform(1, kBatches - 2)), Uniform(0, 30)};
  }
  static Shot Then(const std::string& role, int rank, int delay_ms = kGapMs) { return {role, rank, "", "", delay_ms}; }

  // Starts the job, fires the shots, measures the recovery time; returns the output
  // offset after the last shot. Fails the test when a moment never comes.
  void Fire(const std::vector<Shot>& shots) {
    job_ = std::make_unique<Subprocess>(Argv(shape_));
    size_t at = 0;
    for (const Shot& s : shots) {
      if (!s.text.empty()) {
        at = WaitForLine(*job_, s.who, s.text, kLineTimeout, at);
        ASSERT_NE(at, std::string::npos) << "never saw " << s.who << " " << s.text << ":\n" << job_->output();
      }
      absl::SleepFor(absl::Milliseconds(s.delay_ms));
      if (s.role.empty()) continue;
      const pid_t pid = FindLaunchedChild(job_->pid(), s.role, s.rank);
      ASSERT_GT(pid, 0) << "no " << Name(s) << " among the launcher's children:\n" << job_->output();
      ASSERT_EQ(::kill(pid, SIGKILL), 0);
      const size_t now = job_->output().size();
      last_kill_ = absl::Now();
      last_kill_at_ = now;
      if (first_kill_ == absl::InfinitePast()) first_kill_ = last_kill_;
      if (s.role == "worker") killed_workers_.push_back(s.rank);
      at = std::max(at, now);
      std::cout << "seed " << ChaosSeed() << ": SIGKILL to " << Name(s) << " " << s.delay_ms << " ms after "
                << (s.text.empty() ? std::string("the previous kill") : absl::StrCat("\"", s.text, "\"")) << std::endl;
    }
  }

  // The job's next committed step after the last kill: a worker's step two past the
  // newest it logged before (one step may complete on pushes already sent), or back
  // before it (a rollback), timed by that line's own timestamp, so that a step logged
  // while the test still slept between two kills counts when it happened. A worker that
  // was not killed is watched; when both were, worker 0. Prints the time from the last
  // kill ("recovery time") and from the first (how long the job stood still in all).
  void MeasureRecovery() {
    int w = 0;
    while (w < 2 && std::count(killed_workers_.begin(), killed_workers_.end(), w) > 0) ++w;
    if (w == 2) w = 0;
    const std::string who = absl::StrCat("[worker ", w, "]");
    const int before = LastStep(job_->output(), who, last_kill_at_);
    size_t at = last_kill_at_;
    absl::Time committed;
    for (;;) {
      at = WaitForLine(*job_, who, "] Batch [", kLineTimeout, at);
      ASSERT_NE(at, std::string::npos) << "worker " << w << " made no step after the kills:\n" << job_->output();
      const std::string& out = job_->output();
      const size_t start = out.rfind('\n', at - 2) + 1;  // npos + 1 == 0: the first line
      const absl::string_view line = absl::string_view(out).substr(start, at - start - 1);
      const int step = StepOf(line);
      if (step >= before + 2 || step < before) {
        committed = LineTime(line);
        ASSERT_NE(committed, absl::InfinitePast()) << "no time in: " << line;
        break;
      }
    }
    const double s = absl::ToDoubleSeconds(committed - last_kill_);
    const double outage = absl::ToDoubleSeconds(committed - first_kill_);
    std::cout << absl::StrFormat(
                     "recovery time: %.2f s (last kill to worker %d's next committed step; %.2f s from "
                     "the first kill)",
                     s, w, outage)
              << std::endl;
    ::testing::Test::RecordProperty("recovery_seconds", absl::StrFormat("%.2f", s));
  }

  // Exit 0 and both workers on the uninterrupted run's weights.
  void ExpectExactEnd() {
    const std::string ref = Reference(shape_);
    ASSERT_FALSE(ref.empty());
    const int code = job_->Wait(kRunTimeout);
    const std::string& out = job_->output();
    ASSERT_EQ(code, 0) << out;
    const std::vector<std::string> got = FinalWeights(out);
    ASSERT_EQ(got.size(), 2u) << out;
    EXPECT_EQ(got[0], ref) << out;
    EXPECT_EQ(got[1], ref) << out;
    EXPECT_EQ(out.find("belongs to job"), std::string::npos) << "a process was refused as another job's:\n" << out;
  }

  Subprocess& job() { return *job_; }

  // DTRAIN_CHAOS_VERBOSE=1: the job's whole output, also when the scenario passed
  // (where a slow recovery spent its time).
  ~Pair() {
    const char* verbose = std::getenv("DTRAIN_CHAOS_VERBOSE");
    if (job_ != nullptr && verbose != nullptr && *verbose == '1') std::cout << job_->output() << std::endl;
  }

 private:
  Shape shape_;
  std::mt19937_64 rng_;
  std::unique_ptr<Subprocess> job_;
  absl::Time first_kill_ = absl::InfinitePast();
  absl::Time last_kill_ = absl::InfinitePast();
  size_t last_kill_at_ = 0;
  std::vector<int> killed_workers_;
};

// The reference runs first, alone: a scenario's timing then does not share the cores
// with it.
void WarmReference(Shape shape) { ASSERT_FALSE(Reference(shape).empty()); }

// The cases that ended the job before the launcher pinned one job id for every child:
// the restarted worker 0 reached the restarted scheduler first and gave the job a new id.
TEST(ChaosPairsTest, WorkerZeroThenSchedulerMidEpoch) {
  WarmReference(Shape::kPlain);
  Pair p(Shape::kPlain, 1);
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("worker", 0), Pair::Then("scheduler", 0)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

TEST(ChaosPairsTest, SchedulerThenWorkerZeroMidEpoch) {
  WarmReference(Shape::kPlain);
  Pair p(Shape::kPlain, 2);
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("scheduler", 0), Pair::Then("worker", 0)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

TEST(ChaosPairsTest, SchedulerThenReplicatedServerMidEpoch) {
  WarmReference(Shape::kReplicated);
  Pair p(Shape::kReplicated, 3);
  const int server = p.Uniform(0, 2);
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("scheduler", 0), Pair::Then("server", server)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

TEST(ChaosPairsTest, WorkerOneThenWorkerZeroMidEpoch) {
  WarmReference(Shape::kPlain);
  Pair p(Shape::kPlain, 4);
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("worker", 1), Pair::Then("worker", 0)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

TEST(ChaosPairsTest, WorkerThenReplicatedServerMidEpoch) {
  WarmReference(Shape::kReplicated);
  Pair p(Shape::kReplicated, 5);
  const int worker = p.Uniform(0, 1);
  const int server = p.Uniform(0, 2);
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("worker", worker), Pair::Then("server", server)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

// During start-up: registered, somewhere in connecting, configuring and the first pull.
TEST(ChaosPairsTest, SchedulerAndAWorkerDuringStartUp) {
  WarmReference(Shape::kPlain);
  Pair p(Shape::kPlain, 6);
  const int worker = p.Uniform(0, 1);
  ASSERT_NO_FATAL_FAILURE(
      p.Fire({{"scheduler", 0, "[worker 1]", "joined the job", p.Uniform(0, 400)}, Pair::Then("worker", worker)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

// Worker 0 writes its checkpoint at the end of epoch 0; the scheduler dies with it.
TEST(ChaosPairsTest, WorkerZeroDuringItsCheckpointSaveThenScheduler) {
  WarmReference(Shape::kPlain);
  Pair p(Shape::kPlain, 7);
  ASSERT_NO_FATAL_FAILURE(
      p.Fire({{"worker", 0, "[worker 0]", "Epoch[0] Time cost", p.Uniform(0, 40)}, Pair::Then("scheduler", 0)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

// A server loses its shard after the snapshot of step 50; while the job rolls back to
// it, the scheduler (or a worker) dies too.
TEST(ChaosPairsTest, ServerThenSchedulerDuringARollback) {
  WarmReference(Shape::kSnapshots);
  Pair p(Shape::kSnapshots, 8);
  const bool scheduler = p.Uniform(0, 1) == 0;
  ASSERT_NO_FATAL_FAILURE(p.Fire({{"", 0, "[server 1]", "snapshot of step 50", 0},
                                  {"server", 1, "[worker 1]", BatchLine(2, p.Uniform(5, 12)), p.Uniform(0, 30)},
                                  Pair::Then(scheduler ? "scheduler" : "worker", 0, p.Uniform(100, kGapMs))}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

// A restarted server is being copied its range by its partner when the scheduler dies.
TEST(ChaosPairsTest, SchedulerDiesWhileARestartedServerIsCopiedItsRange) {
  WarmReference(Shape::kReplicated);
  Pair p(Shape::kReplicated, 9);
  const int server = p.Uniform(0, 2);
  const int partner = (server + 1) % 3;
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("server", server),
                                  {"scheduler", 0, absl::StrCat("[server ", partner, "]"),
                                   absl::StrCat("server ", server, " restarted at "), p.Uniform(0, 40)}}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

// With --replication 3 every range lives on all three servers: two may die together.
TEST(ChaosPairsTest, TwoServersOfThreeWithReplicationThree) {
  WarmReference(Shape::kReplicated3);
  Pair p(Shape::kReplicated3, 10);
  const int first = p.Uniform(0, 2);
  const int second = (first + p.Uniform(1, 2)) % 3;
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("server", first), Pair::Then("server", second)}));
  ASSERT_NO_FATAL_FAILURE(p.MeasureRecovery());
  p.ExpectExactEnd();
}

// Both replicas of a range at once, no snapshots: nothing can bring it back. The job
// must end soon, non-zero, naming the range that was lost, rather than wait or finish
// on made-up weights.
TEST(ChaosPairsTest, BothReplicasOfARangeLostFailsAtOnceNamingIt) {
  Pair p(Shape::kReplicated, 11);
  const int first = p.Uniform(0, 2);
  const int partner = (first + 1) % 3;  // the chain of `first`'s range is [first, partner]
  ASSERT_NO_FATAL_FAILURE(p.Fire({p.MidEpoch("server", first), Pair::Then("server", partner, 0)}));
  const absl::Time killed = absl::Now();
  const int code = p.job().Wait(absl::Minutes(2));
  const double took = absl::ToDoubleSeconds(absl::Now() - killed);
  const std::string& out = p.job().output();
  EXPECT_NE(code, 0) << out;
  // The workers see it on their next step; the launcher then restarts nothing (the
  // scheduler ended the job), where restarts used to start a new job that failed again.
  EXPECT_LT(took, 10) << "the job took " << took << " s to give up:\n" << out;
  EXPECT_NE(out.find("every replica is gone"), std::string::npos) << out;
  EXPECT_NE(out.find("not restarted: the scheduler ended the job"), std::string::npos) << out;
  EXPECT_EQ(out.find("already holds checkpoints of another run"), std::string::npos) << out;
  std::cout << absl::StrFormat("failed after %.2f s, naming the lost range", took) << std::endl;
}

}  // namespace
}  // namespace dtrain::testing
