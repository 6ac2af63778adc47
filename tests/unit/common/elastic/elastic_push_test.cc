// The PushPull path of an elastic job's server, without gRPC: a real PushPullHandler
// over a real ShardStore merging by a real MembershipGate (StreamOptions::push_gate),
// as dtrain-server wires them. Each push passes the gate with its generation tag
// before the store; a dead worker's removal drops the step's pending pushes and the
// survivors redo it in the new generation.
#include <cstring>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/elastic/membership_gate.h"
#include "common/kv/push_pull_handler.h"
#include "common/kv/shard_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::elastic {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr uint64_t kKey = 3;

// The answers as the reactor would write them: the header, and the data if any.
class RecordingSink final : public kv::AnswerSink {
 public:
  struct Answer {
    v1::PushPullResponse resp;
    std::vector<float> data;
  };
  void Send(const v1::PushPullResponse& resp) override {
    absl::MutexLock lock(&mu_);
    answers_.push_back({resp, {}});
  }
  DataAnswer Prepare(const char* data, size_t bytes) override {
    std::vector<float> copy(bytes / sizeof(float));
    if (bytes > 0) std::memcpy(copy.data(), data, bytes);
    return [this, copy](const v1::PushPullResponse& resp) {
      absl::MutexLock lock(&mu_);
      answers_.push_back({resp, copy});
    };
  }
  // The answers so far, forgotten here.
  std::vector<Answer> Take() {
    absl::MutexLock lock(&mu_);
    std::vector<Answer> out;
    out.swap(answers_);
    return out;
  }

 private:
  absl::Mutex mu_;
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);
};

class ElasticPushTest : public ::testing::Test {
 protected:
  // An elastic store of --elastic 1:4 whose generation 0 is `ranks`, SGD with lr 1;
  // the keys hold {1, 2} each.
  void Start(std::vector<int> ranks, std::vector<uint64_t> keys = {kKey}) {
    gate_ = std::make_unique<MembershipGate>(*MembershipSchedule::Create(1, 4, {{0, std::move(ranks)}}));
    store_.SetStepRanks(gate_.get());
    kv::StoreConfig c;
    c.num_workers = 4;  // the ranks' bound
    c.optimizer.learning_rate = 1.0;
    ASSERT_TRUE(store_.Configure(c).ok());
    const float init[] = {1.0f, 2.0f};
    for (uint64_t key : keys) ASSERT_TRUE(store_.InitKey(key, {2}, init, 2).ok());
    kv::StreamOptions options;
    options.push_gate = gate_.get();
    handler_ = std::make_unique<kv::PushPullHandler>(&store_, options, sink_);
  }

  // A push-pull of worker `rank`'s `grad` for `step`, tagged with `generation`.
  void PushPull(int rank, int64_t step, int generation, std::vector<float> grad, uint64_t key = kKey) {
    v1::PushPullRequest req;
    req.set_request_id(100 + rank);
    req.set_op(v1::OP_PUSH_PULL);
    req.set_worker_rank(rank);
    req.set_step(step);
    req.set_key(key);
    req.set_dtype(v1::DTYPE_FLOAT32);
    req.set_membership_generation(generation);
    const int64_t bytes = static_cast<int64_t>(grad.size() * sizeof(float));
    ASSERT_TRUE(handler_->Handle(req, grad.data(), bytes, true).ok());
  }

  int64_t Version(uint64_t key = kKey) {
    std::vector<kv::KeyVersion> v;
    EXPECT_TRUE(store_.Versions({key}, -1, &v).ok());
    return v.at(0).version;
  }

  kv::ShardStore store_;
  std::unique_ptr<MembershipGate> gate_;
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
  std::unique_ptr<kv::PushPullHandler> handler_;
};

TEST_F(ElasticPushTest, EveryPushPassesTheGateBeforeTheStoreAndItsRefusalIsTheAnswer) {
  Start({0, 1});
  PushPull(0, 0, 0, {1.0f, 1.0f});
  PushPull(1, 0, 0, {3.0f, 5.0f});
  std::vector<RecordingSink::Answer> answers = sink_->Take();
  ASSERT_THAT(answers, SizeIs(2));
  for (const auto& a : answers) {
    EXPECT_EQ(a.resp.code(), 0) << a.resp.message();
    EXPECT_THAT(a.data, ElementsAre(-1.0f, -1.0f));
  }
  // A change to {0,1,2} is proposed: step 1 is held, and the store never sees it.
  ASSERT_EQ(gate_->Propose(1)->highest_step, 0);
  PushPull(0, 1, 0, {9.0f, 9.0f});
  answers = sink_->Take();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_EQ(answers[0].resp.code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_THAT(answers[0].resp.message(), HasSubstr("membership change to generation 1 pending"));
  EXPECT_EQ(store_.parked_pulls(), 0);  // no pull follows a refused push
  ASSERT_TRUE(gate_->Commit(1, {1, {0, 1, 2}}).ok());
  // Worker 0 still on generation 0 must redo step 1; a generation not committed waits.
  PushPull(0, 1, 0, {9.0f, 9.0f});
  PushPull(0, 1, 2, {9.0f, 9.0f});
  answers = sink_->Take();
  ASSERT_THAT(answers, SizeIs(2));
  EXPECT_EQ(answers[0].resp.code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_EQ(answers[0].resp.message(), "membership changed from step 1: generation 1, workers {0,1,2}");
  EXPECT_EQ(answers[1].resp.code(), static_cast<int>(absl::StatusCode::kUnavailable));
  // Step 1 merges the three workers of generation 1, and only theirs.
  PushPull(2, 1, 1, {3.0f, 0.0f});
  PushPull(0, 1, 1, {0.0f, 3.0f});
  EXPECT_EQ(Version(), 1);
  PushPull(1, 1, 1, {6.0f, 6.0f});
  answers = sink_->Take();
  ASSERT_THAT(answers, SizeIs(3));
  for (const auto& a : answers) {
    EXPECT_EQ(a.resp.code(), 0) << a.resp.message();
    EXPECT_EQ(a.resp.version(), 2);
    EXPECT_THAT(a.data, ElementsAre(-4.0f, -4.0f));  // {-1, -1} - mean({3,0}, {0,3}, {6,6})
  }
}

TEST_F(ElasticPushTest, ADeadWorkersStepIsDroppedAndRedoneByTheSurvivorsInTheNewGeneration) {
  Start({0, 1, 2});
  PushPull(0, 0, 0, {3.0f, 3.0f});
  PushPull(1, 0, 0, {0.0f, 0.0f});
  PushPull(2, 0, 0, {0.0f, 3.0f});
  ASSERT_THAT(sink_->Take(), SizeIs(3));  // step 0 merged: {1, 2} - {1, 2}
  // Workers 0 and 1 pushed step 1; worker 2 died before it did.
  PushPull(0, 1, 0, {100.0f, 100.0f});
  PushPull(1, 1, 0, {100.0f, 100.0f});
  EXPECT_EQ(store_.parked_pulls(), 2);
  ASSERT_EQ(gate_->Propose(1)->highest_step, 1);
  const Generation next{1, {0, 1}};
  const absl::Status why = MembershipChangedError(1, next);
  const absl::Status s =
      gate_->CommitDroppingStep(1, next, [&] { return store_.DropPendingStep(next.from_step, why); });
  ASSERT_TRUE(s.ok()) << s;
  std::vector<RecordingSink::Answer> answers = sink_->Take();
  ASSERT_THAT(answers, SizeIs(2));
  for (const auto& a : answers) {
    EXPECT_EQ(a.resp.code(), static_cast<int>(absl::StatusCode::kAborted));
    EXPECT_EQ(a.resp.message(), "membership changed from step 1: generation 1, workers {0,1}");
  }
  EXPECT_EQ(store_.parked_pulls(), 0);
  // The survivors redo step 1 on their new batches: the dropped pushes count for nothing.
  PushPull(0, 1, 1, {1.0f, 1.0f});
  EXPECT_EQ(Version(), 1);  // waits for worker 1's new push, not its dropped one
  PushPull(1, 1, 1, {3.0f, 5.0f});
  answers = sink_->Take();
  ASSERT_THAT(answers, SizeIs(2));
  for (const auto& a : answers) {
    EXPECT_EQ(a.resp.code(), 0) << a.resp.message();
    EXPECT_EQ(a.resp.version(), 2);
    EXPECT_THAT(a.data, ElementsAre(-2.0f, -3.0f));  // {0, 0} - mean({1,1}, {3,5})
  }
}

TEST_F(ElasticPushTest, ADropIsRefusedAndChangesNothingWhenAKeyIsPastTheStep) {
  Start({0, 1}, {3, 4});
  for (uint64_t key : {3, 4}) {
    for (int w : {0, 1}) PushPull(w, 0, 0, {1.0f, 1.0f}, key);
  }
  // Key 3 merged step 1 from both; key 4 has worker 0's push only.
  PushPull(0, 1, 0, {1.0f, 1.0f}, 3);
  PushPull(1, 1, 0, {1.0f, 1.0f}, 3);
  PushPull(0, 1, 0, {1.0f, 1.0f}, 4);
  ASSERT_THAT(sink_->Take(), SizeIs(6));
  ASSERT_TRUE(gate_->Propose(1).ok());
  const Generation next{1, {0}};
  const absl::Status s =
      gate_->CommitDroppingStep(1, next, [&] { return store_.DropPendingStep(1, MembershipChangedError(1, next)); });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "cannot drop the pushes pending for step 1: key 3 is at version 2");
  EXPECT_EQ(store_.parked_pulls(), 1);  // key 4's pull still waits for worker 1
  EXPECT_EQ(gate_->schedule().generations().size(), 1u);
  PushPull(1, 1, 0, {3.0f, 3.0f}, 4);
  EXPECT_EQ(Version(4), 2);  // worker 0's push was kept
  EXPECT_THAT(sink_->Take(), SizeIs(2));
}

TEST(ElasticPushNotElasticTest, AServerWithoutAGateIgnoresTheGenerationTag) {
  kv::ShardStore store;
  kv::StoreConfig c;
  c.num_workers = 1;
  c.optimizer.learning_rate = 1.0;
  ASSERT_TRUE(store.Configure(c).ok());
  const float init[] = {1.0f, 2.0f};
  ASSERT_TRUE(store.InitKey(kKey, {2}, init, 2).ok());
  auto sink = std::make_shared<RecordingSink>();
  kv::PushPullHandler handler(&store, kv::StreamOptions{}, sink);
  v1::PushPullRequest req;
  req.set_op(v1::OP_PUSH_PULL);
  req.set_key(kKey);
  req.set_dtype(v1::DTYPE_FLOAT32);
  req.set_membership_generation(7);
  const std::vector<float> grad = {1.0f, 1.0f};
  ASSERT_TRUE(handler.Handle(req, grad.data(), 8, true).ok());
  const std::vector<RecordingSink::Answer> answers = sink->Take();
  ASSERT_THAT(answers, SizeIs(1));
  EXPECT_EQ(answers[0].resp.code(), 0) << answers[0].resp.message();
  EXPECT_THAT(answers[0].data, ElementsAre(0.0f, 1.0f));
}

}  // namespace
}  // namespace dtrain::elastic
