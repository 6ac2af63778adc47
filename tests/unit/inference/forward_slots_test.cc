#include "services/inference/forward_slots.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace dtrain::inference {
namespace {

TEST(InferenceForwardSlotsTest, WaitsUntilItsDeadlineWhenEverySlotIsBusy) {
  ForwardSlots slots(2);
  auto a = slots.Acquire(absl::InfiniteFuture());
  auto b = slots.Acquire(absl::InfiniteFuture());
  ASSERT_TRUE(a.ok() && b.ok());
  const absl::Time start = absl::Now();
  auto c = slots.Acquire(absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // A passed deadline with a free slot still gets it: the deadline bounds the wait only.
  { auto released = std::move(*a); }
  EXPECT_TRUE(slots.Acquire(absl::Now() - absl::Seconds(1)).ok());
}

TEST(InferenceForwardSlotsTest, NeverMoreHoldersThanSlots) {
  ForwardSlots slots(3);
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto lease = slots.Acquire(absl::Now() + absl::Seconds(10));
        ASSERT_TRUE(lease.ok());
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        absl::SleepFor(absl::Microseconds(100));
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 2);
}

TEST(InferenceForwardSlotsTest, WaitersAreServedInArrivalOrder) {
  ForwardSlots slots(1);
  auto held = slots.Acquire(absl::InfiniteFuture());
  ASSERT_TRUE(held.ok());
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] {
      auto lease = slots.Acquire(absl::Now() + absl::Seconds(10));
      ASSERT_TRUE(lease.ok());
      absl::MutexLock lock(&mu);
      order.push_back(i);
    });
    absl::SleepFor(absl::Milliseconds(30));  // arrive in order 0, 1, 2, 3
  }
  // One who gives up leaves the queue without blocking those behind.
  EXPECT_EQ(slots.Acquire(absl::Now() + absl::Milliseconds(20)).status().code(), absl::StatusCode::kDeadlineExceeded);
  { auto release = std::move(*held); }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace dtrain::inference
