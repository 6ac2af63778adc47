// LocalKVStore and the resume bookkeeping, on plain float buffers (no LibTorch).
#include <cmath>
#include <string>
#include <vector>

#include "common/kv/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/kv/local_kvstore.h"
#include "services/worker/kv/resume_states.h"

namespace dtrain::worker {
namespace {

KVStoreInit SgdInit(double lr, double momentum) {
  KVStoreInit init;
  init.optimizer.name = "sgd";
  init.optimizer.learning_rate = lr;
  init.optimizer.momentum = momentum;
  return init;
}

TEST(LocalKVStoreTest, AppliesSgdWithMomentumInPlace) {
  std::vector<float> w = {1.0f, 2.0f}, b = {0.5f};
  LocalKVStore kv(KVStoreMode::kLocal);
  ASSERT_TRUE(kv.Init({{"w", {2}, w.data(), 2}, {"b", {1}, b.data(), 1}}, SgdInit(0.1, 0.9)).ok());
  std::vector<float> gw = {1.0f, -1.0f}, gb = {2.0f};
  ASSERT_TRUE(kv.PushPull(0, {gw.data(), gb.data()}).ok());
  // mom = -lr*g; w += mom
  EXPECT_FLOAT_EQ(w[0], 0.9f);
  EXPECT_FLOAT_EQ(w[1], 2.1f);
  EXPECT_FLOAT_EQ(b[0], 0.3f);
  ASSERT_TRUE(kv.PushPull(1, {gw.data(), gb.data()}).ok());
  // mom = 0.9*(-0.1) - 0.1 = -0.19
  EXPECT_NEAR(w[0], 0.9f - 0.19f, 1e-6);
  auto states = kv.SaveStates();
  ASSERT_TRUE(states.ok());
  EXPECT_EQ(states->optimizer, "sgd");
  ASSERT_EQ(states->keys.size(), 2u);
  EXPECT_EQ(states->keys[0].version, 2);
}

TEST(LocalKVStoreTest, StepsAreDoneWhenSentAndOffersAreIgnored) {
  std::vector<float> w = {1.0f, 2.0f};
  LocalKVStore kv(KVStoreMode::kLocal);
  ASSERT_TRUE(kv.Init({{"w", {2}, w.data(), 2}}, SgdInit(0.5, 0)).ok());
  std::vector<float> g = {1.0f, -2.0f};
  std::unique_ptr<OpenStep> open = kv.BeginStep(0);
  EXPECT_FALSE(open->pushes_early());
  ASSERT_TRUE(open->Offer(0, g.data()).ok());
  EXPECT_EQ(w, (std::vector<float>{1.0f, 2.0f})) << "an offer sends nothing";
  absl::StatusOr<std::unique_ptr<PendingStep>> step = open->Send({g.data()});
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE((*step)->done());
  EXPECT_EQ(w, (std::vector<float>{0.5f, 3.0f})) << "the weights are in when Send returns";
  EXPECT_TRUE((*step)->WaitParam(0, absl::InfinitePast()).ok());
  EXPECT_TRUE((*step)->Wait(absl::InfinitePast()).ok());
  EXPECT_EQ(kv.recovery(), nullptr);

  // The step's error comes from the handle, as PushPull returns it.
  absl::StatusOr<std::unique_ptr<PendingStep>> bad = kv.StartStep(1, {});
  ASSERT_TRUE(bad.ok()) << bad.status();
  const absl::Status s = (*bad)->Wait(absl::InfinitePast());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), ::testing::HasSubstr("got 0 gradients for 1 parameters"));
}

TEST(LocalKVStoreTest, ResumeRestoresMomentumExactly) {
  std::vector<float> w1 = {1.0f, 2.0f}, g = {0.3f, -0.7f};
  LocalKVStore straight(KVStoreMode::kLocal);
  ASSERT_TRUE(straight.Init({{"w", {2}, w1.data(), 2}}, SgdInit(0.1, 0.9)).ok());
  ASSERT_TRUE(straight.PushPull(0, {g.data()}).ok());
  auto saved = straight.SaveStates();
  ASSERT_TRUE(saved.ok());
  std::vector<float> w2 = w1;  // the "checkpointed" weights after step 0
  ASSERT_TRUE(straight.PushPull(1, {g.data()}).ok());

  LocalKVStore resumed(KVStoreMode::kLocal);
  KVStoreInit init = SgdInit(0.1, 0.9);
  init.resume = &*saved;
  init.start_version = 1;
  ASSERT_TRUE(resumed.Init({{"w", {2}, w2.data(), 2}}, init).ok());
  ASSERT_TRUE(resumed.PushPull(1, {g.data()}).ok());
  EXPECT_EQ(w1, w2);
}

TEST(LocalKVStoreTest, WrongGradientCountIsRefused) {
  std::vector<float> w = {1.0f};
  LocalKVStore kv(KVStoreMode::kLocal);
  ASSERT_TRUE(kv.Init({{"w", {1}, w.data(), 1}}, SgdInit(0.1, 0)).ok());
  EXPECT_EQ(kv.PushPull(0, {}).code(), absl::StatusCode::kInvalidArgument);
}

// Local mode runs the server's request path (kv::PushPullHandler): what a server
// refuses, it refuses with the server's words, and the weights stay as they were.
TEST(LocalKVStoreTest, RefusesWhatAServerRefuses) {
  std::vector<float> w = {1.0f, 2.0f};
  LocalKVStore kv(KVStoreMode::kLocal);
  ASSERT_TRUE(kv.Init({{"w", {2}, w.data(), 2}}, SgdInit(0.1, 0)).ok());
  std::vector<float> nan = {1.0f, std::nanf("")};
  absl::Status s = kv.PushPull(0, {nan.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("gradient element 1 is NaN"));
  std::vector<float> g = {1.0f, 1.0f};
  s = kv.PushPull(-1, {g.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("step -1 is negative"));
  s = kv.PushPull(3, {g.data()});  // the key is at version 0: step 3's gradient cannot merge
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(w, (std::vector<float>{1.0f, 2.0f}));
  ASSERT_TRUE(kv.PushPull(0, {g.data()}).ok());
  EXPECT_EQ(w, (std::vector<float>{0.9f, 1.9f}));
}

kv::KeyState SavedState(uint64_t key, int64_t version) {
  kv::KeyState k;
  k.key = key;
  k.version = version;
  return k;
}

TEST(ResumeStatesTest, RefusesOtherOptimizerAndForeignKeys) {
  checkpoint::OptimizerStates st;
  st.optimizer = "adam";
  st.keys = {SavedState(kv::MakeKey(0, 0), 5)};
  auto other = IndexResumeStates(&st, "sgd");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("adam"), absl::string_view::npos);

  st.optimizer = "sgd";
  st.keys.push_back(SavedState(kv::MakeKey(7, 0), 5));
  auto index = IndexResumeStates(&st, "sgd");
  ASSERT_TRUE(index.ok());
  int64_t version = 0;
  std::vector<float> state;
  ASSERT_TRUE(index->Take(kv::MakeKey(0, 0), &version, &state).ok());
  EXPECT_EQ(version, 5);
  EXPECT_EQ(index->CheckAllUsed().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(index->Take(kv::MakeKey(3, 0), &version, &state).code(), absl::StatusCode::kFailedPrecondition);

  st.keys.push_back(st.keys[0]);
  EXPECT_FALSE(IndexResumeStates(&st, "sgd").ok());
}

}  // namespace
}  // namespace dtrain::worker
