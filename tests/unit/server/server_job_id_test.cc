// dtrain-server --job-id (or the scheduler's job id) reaches the store's fence:
// a worker of another job is refused naming both ids, even when it speaks first.
#include <string>

#include "common/kv/shard_store.h"
#include "common/kv/worker_fence.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

StoreConfig TwoWorkers() {
  StoreConfig c;
  c.mode = MergeMode::kSync;
  c.num_workers = 2;
  return c;
}

TEST(ServerJobIdTest, SetBeforeConfigureRefusesTheFirstWorkerOfAnotherJob) {
  ShardStore store;
  ASSERT_TRUE(store.SetJobId("job-a").ok());
  EXPECT_EQ(store.job_id(), "job-a");
  ASSERT_TRUE(store.Configure(TwoWorkers()).ok());
  const absl::Status other = store.AdmitWorker(1, "job-b", 1);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.message(), "worker 1 belongs to job 'job-b', but this server runs job 'job-a'");
  EXPECT_TRUE(store.AdmitWorker(0, "job-a", 1).ok());
  EXPECT_TRUE(store.AdmitWorker(1, "", 0).ok()) << "older clients say no job and are not fenced";
}

TEST(ServerJobIdTest, SetAfterConfigureAndConflicts) {
  ShardStore store;
  EXPECT_TRUE(store.SetJobId("").ok());  // no --job-id: nothing to set
  ASSERT_TRUE(store.Configure(TwoWorkers()).ok());
  ASSERT_TRUE(store.SetJobId("job-a").ok());  // the scheduler's, learnt at registration
  EXPECT_TRUE(store.SetJobId("job-a").ok());
  EXPECT_EQ(store.SetJobId("job-b").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.AdmitWorker(0, "job-b", 1).code(), absl::StatusCode::kFailedPrecondition);

  ShardStore unconfigured;
  ASSERT_TRUE(unconfigured.SetJobId("job-a").ok());
  EXPECT_EQ(unconfigured.SetJobId("job-b").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(unconfigured.SetJobId(std::string(kMaxJobIdBytes + 1, 'j')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unconfigured.job_id(), "job-a");
}

}  // namespace
}  // namespace dtrain::kv
