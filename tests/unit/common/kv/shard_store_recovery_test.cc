// The shard store's side of recovery (docs/recovery.md): fencing of older incarnations
// and other jobs, versions for a rejoining worker, exactly-once counting of a
// replacement's redone step, and its exact pulls of the step's weights (a key already
// merged is read from its previous version), so the merged weights are bit-identical
// to a run without the failure.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/kv/shard_store.h"
#include "common/kv/worker_fence.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kWorkers = 3;
constexpr int64_t kNumel = 5;
const std::vector<uint64_t> kKeys = {1, 2, 3};

OptimizerOptions Momentum() {
  OptimizerOptions o;
  o.learning_rate = 0.1;
  o.momentum = 0.9;
  return o;
}

// Gradients with inexact sums, so that counting a push twice (or in another order)
// would show in the bits. Each (worker, step, key) always gives the same gradient,
// as a replacement that recomputes a step does.
std::vector<float> Grad(int worker, int64_t step, uint64_t key) {
  std::vector<float> g(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) {
    g[i] = 0.1f * static_cast<float>(worker + 1) + 0.0137f * static_cast<float>(step * 7 + key * 3 + i) / 3.0f;
  }
  return g;
}

std::unique_ptr<ShardStore> NewStore() {
  auto store = std::make_unique<ShardStore>();
  StoreConfig c;
  c.mode = MergeMode::kSync;
  c.num_workers = kWorkers;
  c.optimizer = Momentum();
  c.keep_previous_version = true;  // as dtrain-server configures dist_sync
  EXPECT_TRUE(store->Configure(c).ok());
  for (uint64_t key : kKeys) {
    std::vector<float> init(kNumel, 0.5f * static_cast<float>(key));
    EXPECT_TRUE(store->InitKey(key, {kNumel}, init.data(), kNumel).ok());
  }
  return store;
}

absl::Status Push(ShardStore& s, int worker, int64_t step, uint64_t key) {
  const std::vector<float> g = Grad(worker, step, key);
  return s.Push(worker, step, key, g.data(), kNumel);
}

// Every worker pushes every key for steps [0, steps).
void RunSteps(ShardStore& s, int64_t from, int64_t to) {
  for (int64_t t = from; t < to; ++t) {
    for (int w = 0; w < kWorkers; ++w) {
      for (uint64_t key : kKeys) ASSERT_TRUE(Push(s, w, t, key).ok());
    }
  }
}

void ExpectBitIdentical(const ShardStore& got, const ShardStore& want) {
  std::vector<KeyState> a, b;
  ASSERT_TRUE(got.Snapshot({}, &a).ok());
  ASSERT_TRUE(want.Snapshot({}, &b).ok());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].version, b[i].version) << "key " << a[i].key;
    ASSERT_EQ(a[i].values.size(), b[i].values.size());
    EXPECT_EQ(0, std::memcmp(a[i].values.data(), b[i].values.data(), a[i].values.size() * sizeof(float)))
        << "key " << a[i].key << ": weights differ from the uninterrupted run";
    EXPECT_EQ(0, std::memcmp(a[i].optimizer_state.data(), b[i].optimizer_state.data(),
                             a[i].optimizer_state.size() * sizeof(float)))
        << "key " << a[i].key << ": momentum differs from the uninterrupted run";
  }
}

TEST(WorkerFenceTest, OlderIncarnationIsFencedNewerTakesTheRank) {
  WorkerFence fence(2);
  auto a = fence.Admit(1, "job-a", 1);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->raised);
  EXPECT_EQ(a->replaced, 0u);
  ASSERT_TRUE(fence.Admit(1, "job-a", 1).ok());
  a = fence.Admit(1, "job-a", 2);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->raised);
  EXPECT_EQ(a->replaced, 1u);
  EXPECT_EQ(fence.incarnation(1), 2u);
  const auto old = fence.Admit(1, "job-a", 1);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(old.status().message(), "fenced: worker 1 incarnation 1 replaced by 2");
  // Another rank is not affected; an old client that says nothing is let through.
  EXPECT_TRUE(fence.Admit(0, "job-a", 1).ok());
  EXPECT_TRUE(fence.Admit(1, "", 0).ok());
}

TEST(WorkerFenceTest, AnotherJobIsRefusedNamingBoth) {
  WorkerFence fence(2);
  ASSERT_TRUE(fence.Admit(0, "job-a", 1).ok());
  EXPECT_EQ(fence.job_id(), "job-a");
  const auto other = fence.Admit(1, "job-b", 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.status().message(), "worker 1 belongs to job 'job-b', but this server runs job 'job-a'");
  EXPECT_EQ(fence.incarnation(1), 0u) << "a refused job must not raise the rank";
  EXPECT_EQ(fence.Admit(0, std::string(kMaxJobIdBytes + 1, 'x'), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fence.Admit(2, "job-a", 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fence.SetJobId("job-c").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStoreRecoveryTest, ReplacementFailsTheOldIncarnationsParkedPulls) {
  auto store = NewStore();
  ASSERT_TRUE(store->AdmitWorker(1, "job-a", 1).ok());
  auto result = std::make_shared<std::optional<absl::Status>>();
  store->Pull(1, 1, /*min_version=*/1, absl::Now() + absl::Seconds(30),
              [result](const absl::Status& s, int64_t, const float*, int64_t) { *result = s; });
  ASSERT_FALSE(result->has_value()) << "the pull should be parked";
  ASSERT_EQ(store->parked_pulls(), 1);

  ASSERT_TRUE(store->AdmitWorker(1, "job-a", 2).ok());
  ASSERT_TRUE(result->has_value());
  EXPECT_EQ((*result)->code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string((*result)->message()),
              AllOf(HasSubstr("fenced: worker 1 incarnation 1 replaced by 2"), HasSubstr("key 1")));
  EXPECT_EQ(store->parked_pulls(), 0);

  const absl::Status old = store->AdmitWorker(1, "job-a", 1);
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(old.message(), "fenced: worker 1 incarnation 1 replaced by 2");
  EXPECT_EQ(store->AdmitWorker(0, "job-b", 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->job_id(), "job-a");
  EXPECT_TRUE(store->AdmitWorker(1, "", 0).ok()) << "older clients are not fenced";
}

TEST(ShardStoreRecoveryTest, VersionsReportEachKeyAndTheWorkersLastPush) {
  auto store = NewStore();
  RunSteps(*store, 0, 2);
  // Step 2 merged on key 1 only; worker 1 pushed key 2 for step 2 as well.
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(Push(*store, w, 2, 1).ok());
  ASSERT_TRUE(Push(*store, 1, 2, 2).ok());

  std::vector<KeyVersion> v;
  ASSERT_TRUE(store->Versions({}, 1, &v).ok());
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].key, 1u);
  EXPECT_EQ(v[0].version, 3);
  EXPECT_EQ(v[0].last_push_step, 2);
  EXPECT_EQ(v[1].version, 2);
  EXPECT_EQ(v[1].last_push_step, 2) << "a pending push counts as accepted";
  EXPECT_EQ(v[2].version, 2);
  EXPECT_EQ(v[2].last_push_step, 1);

  ASSERT_TRUE(store->Versions({3}, -1, &v).ok());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].key, 3u);
  EXPECT_EQ(v[0].last_push_step, -1) << "nobody's last push was asked for";
  EXPECT_EQ(store->Versions({99}, 0, &v).code(), absl::StatusCode::kNotFound);
}

// Worker 1 (incarnation 1) dies during step 2 having pushed key 1 (merged there, since
// it was the last), and key 2 (held, pending), but not key 3 (never delivered). Its replacement
// (incarnation 2) asks the versions, redoes step 2 from the weights of version 2 with
// the same batch (the same gradient bits) and pushes every key again: key 1's push is
// for a merged step and key 2's a duplicate of a pending one (both acknowledged and
// ignored), key 3's is new and counted. The weights end bit-identical to a run
// without the failure.
TEST(ShardStoreRecoveryTest, ReplacementsRedoneStepCountsOnceAndEndsBitIdentical) {
  auto reference = NewStore();
  RunSteps(*reference, 0, 4);

  auto store = NewStore();
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(store->AdmitWorker(w, "job-a", 1).ok());
  RunSteps(*store, 0, 2);
  // Step 2: workers 0 and 2 push key 1, then worker 1 (merging it); worker 1 pushes key 2.
  ASSERT_TRUE(Push(*store, 0, 2, 1).ok());
  ASSERT_TRUE(Push(*store, 2, 2, 1).ok());
  ASSERT_TRUE(Push(*store, 1, 2, 1).ok());
  ASSERT_TRUE(Push(*store, 1, 2, 2).ok());
  // ... and dies. Worker 0 pushes keys 2 and 3 of step 2, worker 2 key 3 (their pulls
  // wait for worker 1).
  for (uint64_t key : {2, 3}) ASSERT_TRUE(Push(*store, 0, 2, key).ok());
  ASSERT_TRUE(Push(*store, 2, 2, 3).ok());
  const int64_t applied_before = store->updates_applied();

  ASSERT_TRUE(store->AdmitWorker(1, "job-a", 2).ok());
  std::vector<KeyVersion> v;
  ASSERT_TRUE(store->Versions({}, 1, &v).ok());
  int64_t redo = v[0].version;
  for (const KeyVersion& k : v) redo = std::min(redo, k.version);
  ASSERT_EQ(redo, 2) << "the step to redo is the least version";

  for (uint64_t key : kKeys) ASSERT_TRUE(Push(*store, 1, redo, key).ok()) << "key " << key;
  EXPECT_EQ(store->updates_applied(), applied_before + 1)
      << "key 3 merges now; key 1 merged before the death, key 2 still waits for worker 2";
  ASSERT_TRUE(store->Versions({2}, 1, &v).ok());
  EXPECT_EQ(v[0].version, 2) << "worker 1's second push of key 2 must not count as worker 2's";
  ASSERT_TRUE(Push(*store, 2, 2, 2).ok());
  // The fenced process, if it comes back, cannot add anything.
  EXPECT_EQ(store->AdmitWorker(1, "job-a", 1).code(), absl::StatusCode::kFailedPrecondition);

  RunSteps(*store, 3, 4);
  ExpectBitIdentical(*store, *reference);
}

// A model whose gradients depend on the weights, as a network's do: every key's
// gradient reads every key's weights, so a worker that computes step t from a key at
// the wrong version gets other bits for all its keys.
using Weights = std::vector<std::vector<float>>;  // indexed like kKeys

Weights Gradients(int worker, int64_t step, const Weights& w) {
  Weights g(w.size(), std::vector<float>(kNumel));
  for (size_t k = 0; k < w.size(); ++k) {
    const std::vector<float>& b = w[(k + 1) % w.size()];
    const std::vector<float>& c = w[(k + 2) % w.size()];
    for (int64_t i = 0; i < kNumel; ++i) {
      g[k][i] = 0.1f * static_cast<float>(worker + 1) + 0.3f * w[k][i] - 0.17f * b[i] * c[i] +
                0.001f * static_cast<float>(step);
    }
  }
  return g;
}

// Worker `worker`'s pull of `key` at `version`, answered at once (asserted).
std::vector<float> PullNow(ShardStore& s, int worker, uint64_t key, int64_t version, PullMode mode,
                           int64_t* got_version = nullptr) {
  std::optional<absl::Status> status;
  std::vector<float> out;
  s.Pull(
      worker, key, version, absl::InfiniteFuture(),
      [&](const absl::Status& st, int64_t v, const float* data, int64_t numel) {
        status = st;
        if (got_version != nullptr) *got_version = v;
        if (data != nullptr) out.assign(data, data + numel);
      },
      /*owner=*/0, mode);
  EXPECT_TRUE(status.has_value()) << "pull of key " << key << " version " << version << " was parked";
  EXPECT_TRUE(status.has_value() && status->ok()) << (status.has_value() ? status->ToString() : "");
  return out;
}

Weights PullAll(ShardStore& s, int worker, int64_t version, PullMode mode = PullMode::kAtLeast) {
  Weights w;
  for (uint64_t key : kKeys) w.push_back(PullNow(s, worker, key, version, mode));
  return w;
}

absl::Status PushGrad(ShardStore& s, int worker, int64_t step, size_t k, const Weights& g) {
  return s.Push(worker, step, kKeys[k], g[k].data(), kNumel);
}

// Steps [from, to) of the weight-dependent model: every worker pulls step t's weights,
// computes, then all push.
void TrainSteps(ShardStore& s, int64_t from, int64_t to) {
  for (int64_t t = from; t < to; ++t) {
    std::vector<Weights> grads;
    for (int w = 0; w < kWorkers; ++w) grads.push_back(Gradients(w, t, PullAll(s, w, t)));
    for (int w = 0; w < kWorkers; ++w) {
      for (size_t k = 0; k < kKeys.size(); ++k) ASSERT_TRUE(PushGrad(s, w, t, k, grads[w]).ok());
    }
  }
}

// Worker 1 dies during step 2 between two keys' pushes: its push of key 1 merged that
// key (it was the last) to version 3, its pushes of keys 2 and 3 were never sent. Its
// replacement finds t = 2 (the least version), pulls exactly version 2 of every key
// -- key 1 from the copy of its previous version -- recomputes the dead worker's
// gradients bit for bit, and pushes: key 1's push is for a merged step (ignored),
// keys 2 and 3 merge. Weights and momentum end bit-identical to a run without the
// death; a plain pull would have given key 1 at version 3 and other gradients.
TEST(ShardStoreRecoveryTest, AKeyAlreadyAtTPlusOneIsPulledAtTAndTheRedoneStepIsBitIdentical) {
  auto reference = NewStore();
  TrainSteps(*reference, 0, 5);

  auto store = NewStore();
  for (int w = 0; w < kWorkers; ++w) ASSERT_TRUE(store->AdmitWorker(w, "job-a", 1).ok());
  TrainSteps(*store, 0, 2);
  constexpr int64_t t = 2;
  std::vector<Weights> grads;
  for (int w = 0; w < kWorkers; ++w) grads.push_back(Gradients(w, t, PullAll(*store, w, t)));
  const Weights dead_workers_weights = PullAll(*store, 1, t);
  ASSERT_TRUE(PushGrad(*store, 0, t, 0, grads[0]).ok());
  ASSERT_TRUE(PushGrad(*store, 2, t, 0, grads[2]).ok());
  ASSERT_TRUE(PushGrad(*store, 1, t, 0, grads[1]).ok());  // merges key 1 to version 3
  // ... worker 1 dies. The others push keys 2 and 3 (their pulls would wait for it).
  for (int w : {0, 2}) {
    for (size_t k : {1, 2}) ASSERT_TRUE(PushGrad(*store, w, t, k, grads[w]).ok());
  }

  ASSERT_TRUE(store->AdmitWorker(1, "job-a", 2).ok());
  std::vector<KeyVersion> v;
  ASSERT_TRUE(store->Versions({}, 1, &v).ok());
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].version, t + 1) << "key 1's step merged before the death";
  int64_t redo = v[0].version;
  for (const KeyVersion& k : v) redo = std::min(redo, k.version);
  ASSERT_EQ(redo, t);

  // Without the kept copy the replacement would compute from key 1 at t+1: other bits.
  int64_t plain_version = -1;
  const std::vector<float> newer = PullNow(*store, 1, kKeys[0], redo, PullMode::kAtLeast, &plain_version);
  EXPECT_EQ(plain_version, t + 1);
  Weights mixed = dead_workers_weights;
  mixed[0] = newer;
  ASSERT_NE(Gradients(1, t, mixed)[1], grads[1][1]) << "the test must tell the versions apart";

  Weights exact;
  for (uint64_t key : kKeys) {
    int64_t got = -1;
    exact.push_back(PullNow(*store, 1, key, redo, PullMode::kExact, &got));
    EXPECT_EQ(got, redo) << "key " << key;
  }
  ASSERT_EQ(exact, dead_workers_weights) << "version t of every key, key 1 from its previous copy";
  const Weights redone = Gradients(1, redo, exact);
  const int64_t applied_before = store->updates_applied();
  for (size_t k = 0; k < kKeys.size(); ++k) ASSERT_TRUE(PushGrad(*store, 1, redo, k, redone).ok());
  EXPECT_EQ(store->updates_applied(), applied_before + 2) << "keys 2 and 3 merge; key 1's push is ignored";

  TrainSteps(*store, t + 1, 5);
  ExpectBitIdentical(*store, *reference);
}

}  // namespace
}  // namespace dtrain::kv
