// kv::StoreObserver: what the ShardStore reports for the server's metrics.
#include <vector>

#include "common/kv/shard_store.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

struct Recorder : StoreObserver {
  int updates = 0;
  absl::Duration update_time;
  std::vector<absl::Duration> waits;
  std::vector<int64_t> staleness;
  std::vector<int64_t> lags;
  std::vector<int> seen;
  void OnUpdateApplied(absl::Duration took) override {
    ++updates;
    update_time += took;
  }
  void OnSyncStepMerged(absl::Duration wait) override { waits.push_back(wait); }
  void OnAsyncPushApplied(int64_t s) override { staleness.push_back(s); }
  void OnSspPushTaken(int64_t lag) override { lags.push_back(lag); }
  void OnWorkerSeen(int rank) override { seen.push_back(rank); }
};

class StoreObserverTest : public ::testing::Test {
 protected:
  void Configure(MergeMode mode, int workers, int staleness = 0) {
    store_.SetObserver(&recorder_);
    StoreConfig c;
    c.mode = mode;
    c.num_workers = workers;
    c.staleness = staleness;
    c.optimizer.learning_rate = 0.1;
    ASSERT_TRUE(store_.Configure(c).ok());
    const float init[2] = {1, 2};
    ASSERT_TRUE(store_.InitKey(7, {2}, init, 2).ok());
  }
  void PullNow(int worker) {
    store_.Pull(worker, 7, 0, absl::InfiniteFuture(),
                [](const absl::Status& s, int64_t, const float*, int64_t) { EXPECT_TRUE(s.ok()) << s; });
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  ShardStore store_{[this] { return now_; }};
  Recorder recorder_;
  const float grad_[2] = {1, 1};
};

TEST_F(StoreObserverTest, SyncReportsHowLongTheStepWaitedForItsLastWorker) {
  Configure(MergeMode::kSync, 2);
  ASSERT_TRUE(store_.Push(0, 0, 7, grad_, 2).ok());
  now_ += absl::Milliseconds(250);
  EXPECT_TRUE(recorder_.waits.empty());
  ASSERT_TRUE(store_.Push(1, 0, 7, grad_, 2).ok());
  ASSERT_EQ(recorder_.waits.size(), 1u);
  EXPECT_EQ(recorder_.waits[0], absl::Milliseconds(250));
  EXPECT_EQ(recorder_.updates, 1);
  // The update's own time is measured on the real clock, apart from the wait above.
  EXPECT_GT(recorder_.update_time, absl::ZeroDuration());
  EXPECT_LT(recorder_.update_time, absl::Milliseconds(250));
  EXPECT_EQ(store_.update_time(), recorder_.update_time);
  ASSERT_TRUE(store_.Push(1, 0, 7, grad_, 2).ok());  // a retry of a merged step: nothing new
  EXPECT_EQ(recorder_.updates, 1);
  EXPECT_EQ(store_.update_time(), recorder_.update_time);
  EXPECT_EQ(recorder_.seen, (std::vector<int>{0, 1}));
}

TEST_F(StoreObserverTest, AsyncReportsStalenessSinceTheWorkersLastPull) {
  Configure(MergeMode::kAsync, 2);
  PullNow(0);                                        // worker 0 reads version 0
  PullNow(1);                                        // worker 1 reads version 0
  ASSERT_TRUE(store_.Push(1, 0, 7, grad_, 2).ok());  // computed on 0, applied at 0: fresh
  ASSERT_TRUE(store_.Push(0, 0, 7, grad_, 2).ok());  // computed on 0, applied at 1: stale by 1
  PullNow(0);                                        // version 2
  ASSERT_TRUE(store_.Push(0, 1, 7, grad_, 2).ok());  // fresh again
  EXPECT_EQ(recorder_.staleness, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(recorder_.updates, 3);
  EXPECT_TRUE(recorder_.waits.empty());
}

TEST_F(StoreObserverTest, SspReportsEachTakenPushsLag) {
  Configure(MergeMode::kSsp, 2, /*staleness=*/3);
  ASSERT_TRUE(store_.Push(0, 0, 7, grad_, 2).ok());
  ASSERT_TRUE(store_.Push(0, 1, 7, grad_, 2, /*lag=*/1).ok());  // held ahead
  ASSERT_TRUE(store_.Push(0, 1, 7, grad_, 2, /*lag=*/1).ok());  // its retry: not counted again
  ASSERT_TRUE(store_.Push(1, 0, 7, grad_, 2).ok());
  EXPECT_EQ(recorder_.lags, (std::vector<int64_t>{0, 1, 0}));
  EXPECT_TRUE(recorder_.staleness.empty()) << "async's figure is not reported";
}

}  // namespace
}  // namespace dtrain::kv
