#include "services/scheduler/barrier.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace dtrain::scheduler {
namespace {

const NodeKey kW0{Role::kWorker, 0}, kW1{Role::kWorker, 1}, kS0{Role::kServer, 0};

BarrierSet::Describe Describer() {
  return [](const NodeKey& k) { return "last heard 3.2 s ago (" + NodeName(k) + ")"; };
}

absl::Time In(absl::Duration d) { return absl::Now() + d; }

TEST(BarrierTest, ReleasesWhenAllArriveAndIsReusable) {
  BarrierSet b(2, 1, Describer());
  for (int round = 0; round < 3; ++round) {
    absl::Status s0, s1;
    std::thread t([&] { s0 = b.Wait("init", v1::BARRIER_GROUP_WORKERS, kW0, In(absl::Seconds(10))); });
    absl::SleepFor(absl::Milliseconds(20));
    s1 = b.Wait("init", v1::BARRIER_GROUP_WORKERS, kW1, In(absl::Seconds(10)));
    t.join();
    EXPECT_TRUE(s0.ok()) << s0;
    EXPECT_TRUE(s1.ok()) << s1;
  }
}

TEST(BarrierTest, GroupAllNeedsServersToo) {
  BarrierSet b(1, 1, Describer());
  absl::Status w;
  std::thread t([&] { w = b.Wait("x", v1::BARRIER_GROUP_ALL, kW0, In(absl::Seconds(10))); });
  EXPECT_TRUE(b.Wait("x", v1::BARRIER_GROUP_ALL, kS0, In(absl::Seconds(10))).ok());
  t.join();
  EXPECT_TRUE(w.ok()) << w;
  EXPECT_EQ(b.Wait("x", v1::BARRIER_GROUP_WORKERS, kS0, In(absl::Seconds(1))).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BarrierTest, DeadlineNamesWhoIsMissing) {
  BarrierSet b(2, 1, Describer());
  absl::Status s = b.Wait("epoch-1", v1::BARRIER_GROUP_ALL, kW0, In(absl::Milliseconds(150)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("barrier 'epoch-1' (all): 1 of 3 arrived after"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("missing worker rank 1 (last heard 3.2 s ago (worker 1)), server rank 0"),
            absl::string_view::npos)
      << s;
  // The timed-out arrival was withdrawn: a later full round still works.
  absl::Status a, c;
  std::thread t1([&] { a = b.Wait("epoch-1", v1::BARRIER_GROUP_ALL, kW1, In(absl::Seconds(10))); });
  std::thread t2([&] { c = b.Wait("epoch-1", v1::BARRIER_GROUP_ALL, kS0, In(absl::Seconds(10))); });
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_TRUE(b.Wait("epoch-1", v1::BARRIER_GROUP_ALL, kW0, In(absl::Seconds(10))).ok());
  t1.join();
  t2.join();
  EXPECT_TRUE(a.ok() && c.ok()) << a << c;
}

TEST(BarrierTest, DeathOfAMissingMemberAbortsAtOnce) {
  BarrierSet b(2, 0, Describer());
  absl::Status s;
  const absl::Time start = absl::Now();
  std::thread t([&] { s = b.Wait("sync", v1::BARRIER_GROUP_WORKERS, kW0, In(absl::Seconds(30))); });
  absl::SleepFor(absl::Milliseconds(30));
  b.NodeDied(kW1, "heartbeat stream broke");
  t.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_NE(s.message().find("worker 1 died before arriving (heartbeat stream broke)"), absl::string_view::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(BarrierTest, CancelAndCloseWakeWaiters) {
  BarrierSet b(2, 0, Describer());
  EXPECT_EQ(b.Wait("c", v1::BARRIER_GROUP_WORKERS, kW0, absl::InfiniteFuture(), [] { return true; }).code(),
            absl::StatusCode::kCancelled);
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(30));
    b.Close();
  });
  EXPECT_EQ(b.Wait("c", v1::BARRIER_GROUP_WORKERS, kW0, absl::InfiniteFuture()).code(), absl::StatusCode::kUnavailable);
  closer.join();
}

// A barrier used once (per epoch, per checkpoint) must not stay in memory forever.
TEST(BarrierTest, ForgetsABarrierOnceEveryonePassedOrGaveUp) {
  BarrierSet b(2, 1, Describer());
  for (int epoch = 0; epoch < 50; ++epoch) {
    const std::string name = "epoch-" + std::to_string(epoch);
    absl::Status s0;
    std::thread t([&] { s0 = b.Wait(name, v1::BARRIER_GROUP_WORKERS, kW0, In(absl::Seconds(10))); });
    while (b.open_count() == 0) absl::SleepFor(absl::Milliseconds(1));
    ASSERT_TRUE(b.Wait(name, v1::BARRIER_GROUP_WORKERS, kW1, In(absl::Seconds(10))).ok());
    t.join();
    ASSERT_TRUE(s0.ok()) << s0;
  }
  EXPECT_EQ(b.open_count(), 0u);
  EXPECT_EQ(b.Wait("alone", v1::BARRIER_GROUP_WORKERS, kW0, In(absl::Milliseconds(20))).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(b.open_count(), 0u);
}

TEST(BarrierTest, CapsOpenBarriersAndNameLengthNamingTheLimit) {
  BarrierLimits limits;
  limits.max_open = 2;
  limits.max_name_bytes = 8;
  BarrierSet b(2, 1, Describer(), limits);
  absl::Status a, c;
  std::thread ta([&] { a = b.Wait("a", v1::BARRIER_GROUP_WORKERS, kW0, In(absl::Seconds(10))); });
  std::thread tc([&] { c = b.Wait("c", v1::BARRIER_GROUP_WORKERS, kW0, In(absl::Seconds(10))); });
  while (b.open_count() < 2) absl::SleepFor(absl::Milliseconds(1));
  absl::Status full = b.Wait("d", v1::BARRIER_GROUP_WORKERS, kW1, In(absl::Seconds(10)));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("the limit is 2"), std::string::npos) << full;
  absl::Status long_name = b.Wait("123456789", v1::BARRIER_GROUP_WORKERS, kW1, In(absl::Seconds(10)));
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_name.message().find("limit of 8 bytes"), std::string::npos) << long_name;
  // Open barriers still complete, and free their slots.
  EXPECT_TRUE(b.Wait("a", v1::BARRIER_GROUP_WORKERS, kW1, In(absl::Seconds(10))).ok());
  EXPECT_TRUE(b.Wait("c", v1::BARRIER_GROUP_WORKERS, kW1, In(absl::Seconds(10))).ok());
  ta.join();
  tc.join();
  EXPECT_TRUE(a.ok() && c.ok()) << a << c;
  EXPECT_EQ(b.open_count(), 0u);
}

}  // namespace
}  // namespace dtrain::scheduler
