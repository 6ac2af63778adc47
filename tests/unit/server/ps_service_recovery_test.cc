// Recovery over real gRPC (docs/recovery.md): a replacement worker learns the versions,
// fences its predecessor's stream, and its redone step counts once.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/kv/ps_client.h"
#include "tests/unit/server/loopback.h"

namespace dtrain::server {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<worker::PsClient> ConnectAs(Loopback& ps, int rank, const std::string& job, uint64_t incarnation) {
  std::unique_ptr<worker::PsClient> c = ps.Connect(rank);
  if (c != nullptr) c->SetIdentity(job, incarnation);
  return c;
}

TEST(PsServiceRecoveryTest, ReplacementFencesTheOldStreamAndRedoesTheStepOnce) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ConnectAs(ps, 0, "job-a", 1);
  auto w1 = ConnectAs(ps, 1, "job-a", 1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(0.5), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2, 3, 4})}, kRpc).ok());

  // Worker 1 pushes step 0 and parks a pull for its result, then stalls.
  const float g1[4] = {3, 2, 1, 0};
  float old_out[4] = {};
  const auto old_ticket = w1->Submit(worker::KeyRequest::PushPull(0, 5, g1, old_out, 4));
  // Its push is stored once its pull is parked.
  for (const absl::Time until = Soon(); ps.store_.parked_pulls() < 1 && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(ps.store_.parked_pulls(), 1);

  // Its replacement asks where the job is: step 0 not merged, its own push of 0 held.
  auto w1b = ConnectAs(ps, 1, "job-a", 2);
  ASSERT_TRUE(w1b);
  absl::StatusOr<std::vector<kv::KeyVersion>> v = w1b->GetVersions({}, kRpc);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].key, 5u);
  EXPECT_EQ((*v)[0].version, 0);
  EXPECT_EQ((*v)[0].last_push_step, 0);

  // The old process's parked pull is failed, and anything more it sends is refused.
  const absl::Status old = w1->Wait(old_ticket, Soon());
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition) << old;
  EXPECT_THAT(std::string(old.message()), HasSubstr("fenced: worker 1 incarnation 1 replaced by 2"));
  float more[4] = {};
  const absl::Status again = w1->Wait(w1->Submit(worker::KeyRequest::Pull(5, 0, more, 4)), Soon());
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("fenced: worker 1 incarnation 1 replaced by 2"));
  // ... and its stream is closed by the server with that status.
  // Once the client has seen the end (a request in the moment between is UNAVAILABLE
  // "stream ended"), every request fails with the server's reason, not to be retried.
  absl::Status after;
  for (const absl::Time until = Soon(); absl::Now() < until; absl::SleepFor(absl::Milliseconds(10))) {
    after = w1->Wait(w1->Submit(worker::KeyRequest::Pull(5, 0, more, 4)), Soon());
    ASSERT_FALSE(after.ok());
    if (absl::StrContains(after.message(), "stream closed")) break;
  }
  EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition) << after;
  EXPECT_THAT(std::string(after.message()), HasSubstr("fenced: worker 1 incarnation 1 replaced by 2"));

  // The replacement redoes step 0 with the same gradient; worker 0 pushes its own.
  float out0[4] = {}, out1[4] = {};
  const float g0[4] = {1, 2, 3, 4};
  const auto t1 = w1b->Submit(worker::KeyRequest::PushPull(0, 5, g1, out1, 4));
  const auto t0 = w0->Submit(worker::KeyRequest::PushPull(0, 5, g0, out0, 4));
  ASSERT_TRUE(w1b->Wait(t1, Soon()).ok());
  ASSERT_TRUE(w0->Wait(t0, Soon()).ok());
  // w - 0.5 * (g0 + g1) / 2, with g1 counted once.
  EXPECT_THAT(out0, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(out1, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(ps.store_.updates_applied(), 1);

  // A push of a step that merged already (a redo that raced the merge) is acknowledged, ignored.
  ASSERT_TRUE(w1b->Wait(w1b->Submit(worker::KeyRequest::Push(0, 5, g1, 4)), Soon()).ok());
  EXPECT_EQ(ps.store_.updates_applied(), 1);
}

TEST(PsServiceRecoveryTest, AnotherJobIsRefusedNamingBothAndOldClientsAreNotFenced) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ConnectAs(ps, 0, "job-a", 1);
  ASSERT_TRUE(w0);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistAsync, 2, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2, 3, 4})}, kRpc).ok());
  float out[4] = {};
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Pull(5, 0, out, 4)), Soon()).ok());

  auto stranger = ConnectAs(ps, 1, "job-b", 1);
  ASSERT_TRUE(stranger);
  const absl::Status s = stranger->Wait(stranger->Submit(worker::KeyRequest::Pull(5, 0, out, 4)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("worker 1 belongs to job 'job-b', but this server runs job 'job-a'"));
  const auto versions = stranger->GetVersions({5}, kRpc);
  EXPECT_EQ(versions.status().code(), absl::StatusCode::kFailedPrecondition);

  // A client from before recovery says nothing and is served as before.
  auto legacy = ps.Connect(1);
  ASSERT_TRUE(legacy);
  const float g[4] = {1, 1, 1, 1};
  ASSERT_TRUE(legacy->Wait(legacy->Submit(worker::KeyRequest::Push(0, 5, g, 4)), Soon()).ok());
  ASSERT_TRUE(legacy->Wait(legacy->Submit(worker::KeyRequest::Pull(5, 0, out, 4)), Soon()).ok());
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3));
}

TEST(PsServiceRecoveryTest, GetVersionsIsCappedAndNamesUnknownKeys) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  ASSERT_TRUE(w0);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2}), Key(6, {3})}, kRpc).ok());
  const auto many = w0->GetVersions({5, 5, 5}, kRpc);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(many.status().message()), HasSubstr("asks for 3 keys but this server holds 2"));
  const auto unknown = w0->GetVersions({9}, kRpc);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("key 9"));
  const auto all = w0->GetVersions({}, kRpc);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].key, 6u);
  EXPECT_EQ((*all)[1].last_push_step, -1);
}

// Worker 1 dies between two keys' pushes of step 0: key 5 merged to version 1, key 6
// still waits for it. Over real gRPC the replacement pulls exactly version 0 of both
// (key 5 from the copy its server keeps), redoes the step, and the job goes on; an
// exact pull ahead waits for its version, one older than the previous is refused
// without breaking the stream.
TEST(PsServiceRecoveryTest, ExactPullsGiveTheReplacementTheStepsWeightsEvenWhereItMerged) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ConnectAs(ps, 0, "job-a", 1);
  auto w1 = ConnectAs(ps, 1, "job-a", 1);
  ASSERT_TRUE(w0 && w1);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 2, Sgd(0.5), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2, 3, 4}), Key(6, {10, 20, 30, 40})}, kRpc).ok());
  const float g0[4] = {1, 2, 3, 4};
  const float g1[4] = {3, 2, 1, 0};
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Push(0, 5, g0, 4)), Soon()).ok());
  ASSERT_TRUE(w1->Wait(w1->Submit(worker::KeyRequest::Push(0, 5, g1, 4)), Soon())
                  .ok());  // key 5 merges: w - 0.5 * (g0 + g1) / 2
  w1.reset();              // ... and dies before pushing key 6
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Push(0, 6, g0, 4)), Soon()).ok());

  auto w1b = ConnectAs(ps, 1, "job-a", 2);
  ASSERT_TRUE(w1b);
  absl::StatusOr<std::vector<kv::KeyVersion>> v = w1b->GetVersions({}, kRpc);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ((*v)[0].version, 1);
  EXPECT_EQ((*v)[1].version, 0);

  float plain[4] = {};
  int64_t plain_version = -1;
  ASSERT_TRUE(w1b->Wait(w1b->Submit(worker::KeyRequest::Pull(5, 0, plain, 4, &plain_version)), Soon()).ok());
  EXPECT_EQ(plain_version, 1) << "a plain pull gets the merged weights";
  EXPECT_THAT(plain, ElementsAre(0, 1, 2, 3));

  float a[4] = {}, b[4] = {};
  int64_t va = -1, vb = -1;
  const auto ta = w1b->Submit(worker::KeyRequest::PullExact(5, 0, a, 4, &va));
  const auto tb = w1b->Submit(worker::KeyRequest::PullExact(6, 0, b, 4, &vb));
  ASSERT_TRUE(w1b->Wait(ta, Soon()).ok());
  ASSERT_TRUE(w1b->Wait(tb, Soon()).ok());
  EXPECT_EQ(va, 0) << "the response's version is that of its data";
  EXPECT_THAT(a, ElementsAre(1, 2, 3, 4)) << "key 5 from the previous version the server kept";
  EXPECT_EQ(vb, 0);
  EXPECT_THAT(b, ElementsAre(10, 20, 30, 40));

  // The redo: key 5's push is for a merged step (acknowledged, ignored), key 6 merges.
  float out5[4] = {}, out6[4] = {};
  const auto r5 = w1b->Submit(worker::KeyRequest::PushPull(0, 5, g1, out5, 4));
  const auto r6 = w1b->Submit(worker::KeyRequest::PushPull(0, 6, g1, out6, 4));
  ASSERT_TRUE(w1b->Wait(r5, Soon()).ok());
  ASSERT_TRUE(w1b->Wait(r6, Soon()).ok());
  EXPECT_THAT(out5, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(out6, ElementsAre(9, 19, 29, 39));
  EXPECT_EQ(ps.store_.updates_applied(), 2);

  // An exact pull of version 2 of key 5 waits for step 1 to merge there.
  float ahead[4] = {};
  int64_t ahead_version = -1;
  const auto tahead = w1b->Submit(worker::KeyRequest::PullExact(5, 2, ahead, 4, &ahead_version));
  for (const absl::Time until = Soon(); ps.store_.parked_pulls() < 1 && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(ps.store_.parked_pulls(), 1);
  ASSERT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Push(1, 5, g0, 4)), Soon()).ok());
  ASSERT_TRUE(w1b->Wait(w1b->Submit(worker::KeyRequest::Push(1, 5, g1, 4)), Soon()).ok());
  ASSERT_TRUE(w1b->Wait(tahead, Soon()).ok());
  EXPECT_EQ(ahead_version, 2);
  EXPECT_THAT(ahead, ElementsAre(-1, 0, 1, 2));

  // Version 0 is now two behind: refused naming what is held; the stream carries on.
  float old[4] = {};
  const absl::Status s = w1b->Wait(w1b->Submit(worker::KeyRequest::PullExact(5, 0, old, 4)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("exact pull of key 5 version 0 by worker 1: the key holds version 2 and its previous, 1"));
  EXPECT_TRUE(w1b->Wait(w1b->Submit(worker::KeyRequest::PullExact(5, 1, old, 4)), Soon()).ok());
  EXPECT_THAT(old, ElementsAre(0, 1, 2, 3));
}

TEST(PsServiceRecoveryTest, ExactPullsAreRefusedByAnAsyncServer) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  ASSERT_TRUE(w0);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistAsync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  EXPECT_EQ(ps.store_.bytes_held(), 8) << "async keeps no previous version";
  float out[2] = {};
  const absl::Status s = w0->Wait(w0->Submit(worker::KeyRequest::PullExact(5, 0, out, 2)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("exact pulls are for dist_sync"));
  EXPECT_TRUE(w0->Wait(w0->Submit(worker::KeyRequest::Pull(5, 0, out, 2)), Soon()).ok()) << "the stream carries on";
}

TEST(PsServiceRecoveryTest, ADistSyncServerHoldsEachKeysWeightsTwice) {
  Loopback ps;
  ASSERT_TRUE(ps.ok());
  auto w0 = ps.Connect(0);
  ASSERT_TRUE(w0);
  ASSERT_TRUE(w0->Configure(KVStoreMode::kDistSync, 1, Sgd(1.0), kRpc).ok());
  ASSERT_TRUE(w0->InitKeys({Key(5, {1, 2})}, kRpc).ok());
  EXPECT_EQ(ps.store_.bytes_held(), 16) << "weights and their previous version; plain SGD has no state";
}

}  // namespace
}  // namespace dtrain::server
