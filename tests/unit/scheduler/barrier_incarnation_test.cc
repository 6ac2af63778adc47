// Barriers across incarnations (docs/recovery.md): a process that took a rank after
// the job started goes through the same named barriers as the one it replaced.
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "services/scheduler/barrier.h"

namespace dtrain::scheduler {
namespace {

const NodeKey kW0{Role::kWorker, 0}, kW1{Role::kWorker, 1};
constexpr auto kWorkers = v1::BARRIER_GROUP_WORKERS;

absl::Time In(absl::Duration d) { return absl::Now() + d; }

// One round of `name` passed by worker 0 and worker 1, both incarnation 1.
void PassRound(BarrierSet& b, const std::string& name) {
  absl::Status s0;
  std::thread t([&] { s0 = b.Wait(name, kWorkers, kW0, 1, In(absl::Seconds(10))); });
  ASSERT_TRUE(b.Wait(name, kWorkers, kW1, 1, In(absl::Seconds(10))).ok());
  t.join();
  ASSERT_TRUE(s0.ok()) << s0;
}

TEST(BarrierIncarnationTest, ReplacementPassesARoundItsPredecessorPassedAtOnce) {
  BarrierSet b(2, 0, nullptr);
  PassRound(b, "kvstore-init");
  EXPECT_EQ(b.open_count(), 0u);  // the round is forgotten, its history is not
  EXPECT_EQ(b.rounds_passed("kvstore-init", kWorkers, kW1), 1u);

  testing::internal::CaptureStderr();
  // A deadline already past: only a call let through at once can be OK.
  absl::Status s = b.Wait("kvstore-init", kWorkers, kW1, 2, absl::Now());
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_NE(log.find("barrier 'kvstore-init': worker 1 incarnation 2 passes round 0, passed by incarnation 1"),
            std::string::npos)
      << log;

  // Its second call is for a round nobody passed yet: it waits for worker 0.
  EXPECT_EQ(b.Wait("kvstore-init", kWorkers, kW1, 2, In(absl::Milliseconds(50))).code(),
            absl::StatusCode::kDeadlineExceeded);
  // A failed call does not count: the retry is the same call, and it joins.
  absl::Status s0;
  std::thread t([&] { s0 = b.Wait("kvstore-init", kWorkers, kW0, 1, In(absl::Seconds(10))); });
  EXPECT_TRUE(b.Wait("kvstore-init", kWorkers, kW1, 2, In(absl::Seconds(10))).ok());
  t.join();
  EXPECT_TRUE(s0.ok()) << s0;
  EXPECT_EQ(b.rounds_passed("kvstore-init", kWorkers, kW1), 2u);
  EXPECT_EQ(b.rounds_passed("kvstore-init", kWorkers, kW0), 2u);
}

TEST(BarrierIncarnationTest, ReplacementOfOneThatDiedWaitingJoinsTheCurrentRound) {
  BarrierSet b(2, 0, nullptr);
  // Worker 1 incarnation 1 waits, then dies: its RPC is cancelled and it withdraws.
  std::atomic<bool> dead{false};
  absl::Status old;
  std::thread predecessor(
      [&] { old = b.Wait("epoch-0", kWorkers, kW1, 1, In(absl::Seconds(10)), [&] { return dead.load(); }); });
  while (b.open_count() == 0) absl::SleepFor(absl::Milliseconds(1));
  dead = true;
  predecessor.join();
  EXPECT_EQ(old.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(b.rounds_passed("epoch-0", kWorkers, kW1), 0u);

  // The replacement joins; the round completes only when worker 0 arrives.
  std::atomic<bool> replaced_done{false};
  absl::Status replacement;
  std::thread t([&] {
    replacement = b.Wait("epoch-0", kWorkers, kW1, 2, In(absl::Seconds(10)));
    replaced_done = true;
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(replaced_done.load());
  EXPECT_TRUE(b.Wait("epoch-0", kWorkers, kW0, 1, In(absl::Seconds(10))).ok());
  t.join();
  EXPECT_TRUE(replacement.ok()) << replacement;
  EXPECT_EQ(b.rounds_passed("epoch-0", kWorkers, kW1), 1u);
}

// A paused predecessor (SIGSTOP: its RPC stays open) and its replacement wait in the
// same round: the rank counts once, so the round still needs worker 0, and it is one
// round passed, not two.
TEST(BarrierIncarnationTest, PausedPredecessorAndReplacementCountOnce) {
  BarrierSet b(2, 0, nullptr);
  absl::Status old, replacement;
  std::thread predecessor([&] { old = b.Wait("sync", kWorkers, kW1, 1, In(absl::Seconds(10))); });
  while (b.open_count() == 0) absl::SleepFor(absl::Milliseconds(1));
  std::atomic<bool> replaced_done{false};
  std::thread t([&] {
    replacement = b.Wait("sync", kWorkers, kW1, 2, In(absl::Seconds(10)));
    replaced_done = true;
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(replaced_done.load()) << "two arrivals of worker 1 completed a round of two workers";
  EXPECT_TRUE(b.Wait("sync", kWorkers, kW0, 1, In(absl::Seconds(10))).ok());
  t.join();
  predecessor.join();
  EXPECT_TRUE(replacement.ok()) << replacement;
  EXPECT_TRUE(old.ok()) << old;  // fenced by the scheduler on its next request, not here
  EXPECT_EQ(b.rounds_passed("sync", kWorkers, kW1), 1u);
  // The replacement's next call is for round 1: it waits.
  EXPECT_EQ(b.Wait("sync", kWorkers, kW1, 2, In(absl::Milliseconds(50))).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(BarrierIncarnationTest, ReplacementPassesEveryRoundItsPredecessorPassedThenWaits) {
  BarrierSet b(2, 0, nullptr);
  for (int i = 0; i < 3; ++i) PassRound(b, "epoch");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.Wait("epoch", kWorkers, kW1, 2, absl::Now()).ok()) << i;
  EXPECT_EQ(b.Wait("epoch", kWorkers, kW1, 2, In(absl::Milliseconds(50))).code(), absl::StatusCode::kDeadlineExceeded);
  // A third incarnation starts over from round 0.
  EXPECT_TRUE(b.Wait("epoch", kWorkers, kW1, 3, absl::Now()).ok());
}

// Older clients say no incarnation: every call joins the current round, as before.
TEST(BarrierIncarnationTest, IncarnationZeroAlwaysJoins) {
  BarrierSet b(2, 0, nullptr);
  absl::Status s0;
  std::thread t([&] { s0 = b.Wait("init", kWorkers, kW0, In(absl::Seconds(10))); });
  ASSERT_TRUE(b.Wait("init", kWorkers, kW1, In(absl::Seconds(10))).ok());
  t.join();
  ASSERT_TRUE(s0.ok()) << s0;
  EXPECT_EQ(b.rounds_passed("init", kWorkers, kW1), 1u);
  EXPECT_EQ(b.Wait("init", kWorkers, kW1, In(absl::Milliseconds(50))).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(BarrierIncarnationTest, HistoryIsCappedForgettingTheLeastRecentlyUsed) {
  BarrierLimits limits;
  limits.max_history = 2;
  BarrierSet b(2, 0, nullptr, limits);
  PassRound(b, "a");
  PassRound(b, "b");
  PassRound(b, "a");  // "b" is now the least recently used
  PassRound(b, "c");
  EXPECT_EQ(b.history_count(), 2u);
  EXPECT_EQ(b.rounds_passed("a", kWorkers, kW1), 2u);
  EXPECT_EQ(b.rounds_passed("b", kWorkers, kW1), 0u);
  EXPECT_EQ(b.rounds_passed("c", kWorkers, kW1), 1u);
  // A forgotten barrier: the replacement waits for a new round, as before recovery.
  EXPECT_EQ(b.Wait("b", kWorkers, kW1, 2, In(absl::Milliseconds(50))).code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace dtrain::scheduler
