// Recovery over the in-process channel, which runs the server's request path
// (support/in_process_server.h): a replacement worker fencing its predecessor, a step
// that waits for a worker never heard from, a rollback to a server snapshot, and the
// replication join notices a server's answers carry.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/kv/server_channel.h"
#include "tests/unit/common/temp_dir.h"
#include "tests/unit/worker/kv/support/in_process_server.h"

namespace dtrain::worker {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kKey = 5;
constexpr int64_t kNumel = 3;
constexpr char kJob[] = "job-a";

kv::OptimizerOptions Sgd() {
  kv::OptimizerOptions o;
  o.learning_rate = 0.5;
  o.momentum = 0.9;  // optimizer state that a rollback must bring back too
  return o;
}

// Worker `rank`'s gradient of `step`: a different, exact value per element.
std::vector<float> Grad(int rank, int64_t step) {
  std::vector<float> g(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) g[static_cast<size_t>(i)] = 0.25f * static_cast<float>(rank + 2 * step + i);
  return g;
}

class RecoveryTest : public ::testing::Test {
 protected:
  // A 2-worker dist_sync job of one key on one server.
  void Start() {
    for (int r = 0; r < 2; ++r) workers_.push_back(Connect(r, 1));
    ASSERT_TRUE(workers_[0]->Configure(KVStoreMode::kDistSync, 2, Sgd(), absl::Seconds(1)).ok());
    kv::KeyState k;
    k.key = kKey;
    k.shape = {kNumel};
    k.values = {1, 2, 3};
    ASSERT_TRUE(workers_[0]->InitKeys({k}, absl::Seconds(1)).ok());
  }

  std::unique_ptr<ServerChannel> Connect(int rank, uint64_t incarnation) {
    auto c = server_.Connect(rank, absl::Seconds(1));
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    (*c)->SetIdentity(kJob, incarnation);
    return *std::move(c);
  }

  // Both workers push-pull step `step`; the weights they got back.
  std::vector<float> Step(int64_t step) {
    std::vector<float> g0 = Grad(0, step), g1 = Grad(1, step);
    std::vector<float> out0(kNumel), out1(kNumel);
    const auto t0 = workers_[0]->Submit(KeyRequest::PushPull(step, kKey, g0.data(), out0.data(), kNumel));
    const auto t1 = workers_[1]->Submit(KeyRequest::PushPull(step, kKey, g1.data(), out1.data(), kNumel));
    EXPECT_TRUE(workers_[0]->Wait(t0, Soon()).ok());
    EXPECT_TRUE(workers_[1]->Wait(t1, Soon()).ok());
    EXPECT_EQ(out0, out1) << "step " << step;
    return out0;
  }

  int64_t Version(ServerChannel& w) {
    absl::StatusOr<std::vector<kv::KeyVersion>> v = w.GetVersions({kKey}, absl::Seconds(1));
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? (*v)[0].version : -1;
  }

  absl::Time Soon() { return clock_.Now() + absl::Seconds(5); }

  dtrain::testing::TempDir dir_;  // outlives the server's snapshot writer
  // 100 ms a reading: a 5 s wait gives up after 50 readings.
  testing::TickingClock clock_{absl::Milliseconds(100)};
  testing::InProcessServer server_{0, clock_.AsClock()};
  std::vector<std::unique_ptr<ServerChannel>> workers_;
};

TEST_F(RecoveryTest, AReplacementFencesItsPredecessorAndFinishesTheStep) {
  Start();
  // Worker 1's first process pushes step 0 and dies waiting for worker 0.
  std::vector<float> g1 = Grad(1, 0);
  std::vector<float> lost(kNumel);
  const auto parked = workers_[1]->Submit(KeyRequest::PushPull(0, kKey, g1.data(), lost.data(), kNumel));
  EXPECT_FALSE(workers_[1]->WaitUntil(parked, clock_.Now())) << "worker 0 has not pushed";

  // Its replacement asks where the key is, which fences the predecessor.
  std::unique_ptr<ServerChannel> replacement = Connect(1, 2);
  absl::StatusOr<std::vector<kv::KeyVersion>> v = replacement->GetVersions({kKey}, absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].version, 0);
  EXPECT_EQ((*v)[0].last_push_step, 0) << "the predecessor's push of step 0 counts";

  absl::Status s = workers_[1]->Wait(parked, Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("server 0 at inprocess:0: push-pull of key 5"),
                                 HasSubstr("fenced: worker 1 incarnation 1 replaced by 2")));
  // What the old process sends now is refused, and the server closes its stream.
  float out[kNumel];
  s = workers_[1]->Wait(workers_[1]->Submit(KeyRequest::Pull(kKey, 0, out, kNumel)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("fenced: worker 1 incarnation 1 replaced by 2"));
  s = workers_[1]->Wait(workers_[1]->Submit(KeyRequest::Pull(kKey, 0, out, kNumel)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("server 0 at inprocess:0: PushPull stream closed: "));

  // Worker 0's push completes step 0 with the predecessor's; the replacement pulls it.
  std::vector<float> g0 = Grad(0, 0);
  std::vector<float> out0(kNumel), pulled(kNumel);
  ASSERT_TRUE(workers_[0]
                  ->Wait(workers_[0]->Submit(KeyRequest::PushPull(0, kKey, g0.data(), out0.data(), kNumel)), Soon())
                  .ok());
  int64_t version = -1;
  ASSERT_TRUE(
      replacement->Wait(replacement->Submit(KeyRequest::Pull(kKey, 1, pulled.data(), kNumel, &version)), Soon()).ok());
  EXPECT_EQ(version, 1);
  EXPECT_EQ(pulled, out0);
  // w - lr * mean(g0, g1) with momentum's first step: {1,2,3} - 0.5 * {0.125, 0.375, 0.625}.
  EXPECT_THAT(out0, ElementsAre(1 - 0.0625f, 2 - 0.1875f, 3 - 0.3125f));
}

TEST_F(RecoveryTest, AStepThatAWorkerNeverJoinedFailsAtThePullTimeoutNamingIt) {
  Start();
  workers_[0]->SetPullTimeout(absl::Seconds(2));
  std::vector<float> g0 = Grad(0, 0);
  std::vector<float> out(kNumel);
  // The server's answer comes at its 2 s, before this wait's 5 s.
  const absl::Status s =
      workers_[0]->Wait(workers_[0]->Submit(KeyRequest::PushPull(0, kKey, g0.data(), out.data(), kNumel)), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("server 0 at inprocess:0: push-pull of key 5: step 0 key 5"),
                                 HasSubstr("waiting for worker 1 (never heard from)")));
}

TEST_F(RecoveryTest, ARollbackOrderBringsBackTheSnapshotsStepBitForBit) {
  server_.EnableSnapshots(dir_.path(), 2);  // before the workers configure it
  Start();
  std::vector<std::vector<float>> after;  // after[t]: the weights after step t
  for (int64_t t = 0; t < 4; ++t) after.push_back(Step(t));
  EXPECT_THAT(server_.CompleteSnapshots(), ElementsAre(4, 2));

  v1::RollbackOrder order;
  order.set_generation(1);
  order.set_step(2);
  order.set_reason("rolled back from step 4 to step 2: a test");
  ASSERT_TRUE(server_.Rollback(order).ok());
  EXPECT_EQ(Version(*workers_[0]), 2);
  // Each worker pulls exactly version 2 (DistKVStore::Rollback): the weights of the
  // snapshot, which are those after step 1.
  for (auto& w : workers_) {
    std::vector<float> got(kNumel);
    int64_t version = -1;
    ASSERT_TRUE(w->Wait(w->Submit(KeyRequest::PullExact(kKey, 2, got.data(), kNumel, &version)), Soon()).ok());
    EXPECT_EQ(version, 2);
    EXPECT_EQ(0, std::memcmp(got.data(), after[1].data(), sizeof(float) * kNumel));
  }
  // Redone, steps 2 and 3 give the same bits: the momentum came back too.
  EXPECT_EQ(Step(2), after[2]);
  EXPECT_EQ(Step(3), after[3]);
  EXPECT_THAT(server_.CompleteSnapshots(), ElementsAre(4, 2)) << "step 4 of the new timeline";

  // A step without a snapshot is not carried out, and nothing moves.
  order.set_generation(2);
  order.set_step(3);
  EXPECT_FALSE(server_.Rollback(order).ok());
  EXPECT_EQ(Version(*workers_[0]), 4);
}

// Replication: the answer gate a server's ReplicaCatchUp is, as a test sees it: server 2
// at "inprocess:2" joins the key's chain at version `joins_at`; the first answer of
// that version is held until Release.
class Newcomer final : public kv::AnswerGate {
 public:
  explicit Newcomer(int64_t joins_at) : joins_at_(joins_at) {}
  bool Hold(uint64_t /*key*/, int64_t version, Release release, std::vector<kv::JoinedServer>* joined_now) override {
    absl::MutexLock lock(&mu_);
    if (version != joins_at_) return false;
    if (!copied_) {
      held_.push_back(std::move(release));
      return true;
    }
    joined_now->push_back(kJoined);
    return false;
  }
  // The copy is in: the held answers go, naming the newcomer.
  void Release() {
    std::vector<AnswerGate::Release> held;
    {
      absl::MutexLock lock(&mu_);
      copied_ = true;
      held.swap(held_);
    }
    for (auto& r : held) r({kJoined});
  }

 private:
  const kv::JoinedServer kJoined{2, "inprocess:2"};
  const int64_t joins_at_;
  absl::Mutex mu_;
  bool copied_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<AnswerGate::Release> held_ ABSL_GUARDED_BY(mu_);
};

TEST_F(RecoveryTest, AnswersNamingAJoinedServerBecomeJoinNotices) {
  Newcomer gate(1);
  server_.SetAnswerGate(&gate);
  Start();
  std::vector<float> g0 = Grad(0, 0), g1 = Grad(1, 0);
  std::vector<float> out0(kNumel), out1(kNumel);
  const auto t0 = workers_[0]->Submit(KeyRequest::PushPull(0, kKey, g0.data(), out0.data(), kNumel));
  const auto t1 = workers_[1]->Submit(KeyRequest::PushPull(0, kKey, g1.data(), out1.data(), kNumel));
  EXPECT_FALSE(workers_[0]->WaitUntil(t0, clock_.Now() + absl::Milliseconds(300))) << "held until the copy is in";
  EXPECT_TRUE(workers_[0]->TakeJoinNotices().empty());
  gate.Release();
  ASSERT_TRUE(workers_[0]->Wait(t0, Soon()).ok());
  ASSERT_TRUE(workers_[1]->Wait(t1, Soon()).ok());
  for (auto& w : workers_) {
    const std::vector<ServerChannel::JoinNotice> joins = w->TakeJoinNotices();
    ASSERT_EQ(joins.size(), 1u);
    EXPECT_EQ(joins[0].key, kKey);
    EXPECT_EQ(joins[0].version, 1);
    EXPECT_EQ(joins[0].server, 2);
    EXPECT_EQ(joins[0].address, "inprocess:2");
    EXPECT_TRUE(w->TakeJoinNotices().empty()) << "each notice is taken once";
  }
  // A later pull of that version is answered at once, naming the newcomer too.
  std::vector<float> pulled(kNumel);
  ASSERT_TRUE(workers_[1]->Wait(workers_[1]->Submit(KeyRequest::Pull(kKey, 1, pulled.data(), kNumel)), Soon()).ok());
  EXPECT_EQ(workers_[1]->TakeJoinNotices().size(), 1u);
  EXPECT_EQ(pulled, out0);
}

}  // namespace
}  // namespace dtrain::worker
