// An elastic job's pushes (docs/elastic.md) through DistKVStore, without sockets: each
// in-process server is fronted by the servers' own membership gate
// (elastic::MembershipGate::AdmitPush on every push, with the generation the push
// carries), as dtrain-server runs it. A push held by a pending change is sent again
// until the change is decided; one refused "membership changed" ends the step with a
// status the trainer recognises, and redone in the new generation it merges as before.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/elastic/membership_gate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/kv/dist_kvstore.h"
#include "tests/unit/worker/kv/support/in_process_server.h"

namespace dtrain::worker {
namespace {

using testing::FakeJob;
using ::testing::HasSubstr;
using testing::InProcessServers;

constexpr int kWorkers = 2;
const std::vector<int64_t> kSizes = {6, 35};

// A server's channel behind its membership gate: a push the gate refuses is answered
// with the gate's error as a channel reports a server's (server, request, text).
class GatedChannel final : public ServerChannel {
 public:
  GatedChannel(std::unique_ptr<ServerChannel> inner, elastic::MembershipGate* gate, std::atomic<int>* refused)
      : inner_(std::move(inner)), gate_(gate), refused_(refused) {}

  Ticket Submit(const KeyRequest& r) override {
    if (r.op != KeyRequest::Op::kPull) {
      const absl::Status admit = gate_->AdmitPush(r.step_or_version, r.membership_generation);
      if (!admit.ok()) {
        refused_->fetch_add(1);
        absl::MutexLock lock(&mu_);
        const Ticket t = kRefusedBase + next_++;
        refusals_[t] = absl::Status(admit.code(), absl::StrCat("server ", server_rank(), " at ", address(), ": ",
                                                               OpName(r.op), " of key ", r.key, ": ", admit.message()));
        return t;
      }
    }
    return inner_->Submit(r);
  }
  absl::Status Wait(Ticket t, absl::Time deadline) override {
    {
      absl::MutexLock lock(&mu_);
      auto it = refusals_.find(t);
      if (it != refusals_.end()) {
        const absl::Status s = it->second;
        refusals_.erase(it);
        return s;
      }
    }
    return inner_->Wait(t, deadline);
  }
  bool WaitUntil(Ticket t, absl::Time until) override {
    if (t >= kRefusedBase) return true;
    return inner_->WaitUntil(t, until);
  }
  absl::Status WaitAll(absl::Time deadline) override { return inner_->WaitAll(deadline); }
  std::vector<JoinNotice> TakeJoinNotices() override { return inner_->TakeJoinNotices(); }
  absl::Status Configure(KVStoreMode mode, int num_workers, const kv::OptimizerOptions& optimizer,
                         absl::Duration timeout, int staleness, kv::CompressionType pull,
                         const kv::EpochLrSteps& epoch_lr) override {
    return inner_->Configure(mode, num_workers, optimizer, timeout, staleness, pull, epoch_lr);
  }
  absl::Status InitKeys(const std::vector<kv::KeyState>& keys, absl::Duration timeout,
                        const std::vector<std::vector<int>>& chains) override {
    return inner_->InitKeys(keys, timeout, chains);
  }
  absl::StatusOr<std::vector<kv::KeyState>> GetState(const std::vector<uint64_t>& keys,
                                                     absl::Duration timeout) override {
    return inner_->GetState(keys, timeout);
  }
  absl::StatusOr<std::vector<kv::KeyVersion>> GetVersions(const std::vector<uint64_t>& keys,
                                                          absl::Duration timeout) override {
    return inner_->GetVersions(keys, timeout);
  }
  void SetPullCompression(kv::CompressionType type) override { inner_->SetPullCompression(type); }
  void SetPullTimeout(absl::Duration timeout) override { inner_->SetPullTimeout(timeout); }
  void SetIdentity(const std::string& job_id, uint64_t incarnation) override {
    inner_->SetIdentity(job_id, incarnation);
  }
  const std::string& address() const override { return inner_->address(); }
  int server_rank() const override { return inner_->server_rank(); }
  int64_t bytes_pushed() const override { return inner_->bytes_pushed(); }
  int64_t bytes_pushed_uncompressed() const override { return inner_->bytes_pushed_uncompressed(); }
  int64_t bytes_pulled() const override { return inner_->bytes_pulled(); }
  int64_t bytes_pulled_uncompressed() const override { return inner_->bytes_pulled_uncompressed(); }

 private:
  static constexpr Ticket kRefusedBase = Ticket{1} << 62;
  std::unique_ptr<ServerChannel> inner_;
  elastic::MembershipGate* const gate_;
  std::atomic<int>* const refused_;
  absl::Mutex mu_;
  Ticket next_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<Ticket, absl::Status> refusals_ ABSL_GUARDED_BY(mu_);
};

elastic::MembershipSchedule StartSchedule() { return *elastic::MembershipSchedule::Create(1, 3, {{0, {0, 1}}}); }

// Two servers, each behind a gate of its own, as an elastic job runs them.
class ElasticPushTest : public ::testing::Test {
 protected:
  ElasticPushTest() : servers_(2) {
    for (int s = 0; s < servers_.size(); ++s)
      gates_.push_back(std::make_unique<elastic::MembershipGate>(StartSchedule()));
  }

  ChannelFactory Factory() {
    ChannelFactory inner = servers_.factory();
    return [this, inner](int server, const std::string& address, int worker,
                         absl::Duration timeout) -> absl::StatusOr<std::unique_ptr<ServerChannel>> {
      absl::StatusOr<std::unique_ptr<ServerChannel>> c = inner(server, address, worker, timeout);
      if (!c.ok()) return c.status();
      return std::unique_ptr<ServerChannel>(
          std::make_unique<GatedChannel>(*std::move(c), gates_[static_cast<size_t>(server)].get(), &refused_));
    };
  }

  DistOptions Options(absl::Duration sync_timeout = absl::Seconds(20)) {
    DistOptions o;
    o.max_chunk_elems = 16;
    o.connect_timeout = absl::Seconds(1);
    o.sync_timeout = sync_timeout;
    o.elastic = true;
    return o;
  }

  // Each worker (a thread) connects, initialises and runs `body`; returns their weights.
  std::vector<std::vector<std::vector<float>>> Run(
      const DistOptions& options, const std::function<void(int, DistKVStore&, std::vector<const float*>&)>& body) {
    FakeJob job(kWorkers, servers_.endpoints());
    std::vector<std::vector<std::vector<float>>> weights(kWorkers);
    std::vector<std::thread> threads;
    for (int r = 0; r < kWorkers; ++r) {
      threads.emplace_back([&, r] {
        std::vector<std::vector<float>>& w = weights[static_cast<size_t>(r)];
        std::vector<std::vector<float>> g;
        std::vector<ParamRef> params;
        std::vector<const float*> grads;
        for (size_t p = 0; p < kSizes.size(); ++p) {
          w.emplace_back(static_cast<size_t>(kSizes[p]), 0.5f);
          g.emplace_back(static_cast<size_t>(kSizes[p]), 0.125f * static_cast<float>(r + 1));
        }
        for (size_t p = 0; p < kSizes.size(); ++p) {
          params.push_back({"p" + std::to_string(p), {kSizes[p]}, w[p].data(), kSizes[p]});
          grads.push_back(g[p].data());
        }
        auto store = DistKVStore::Connect(options, job.worker(r), Factory());
        ASSERT_TRUE(store.ok()) << store.status();
        KVStoreInit init;
        init.optimizer.name = "sgd";
        init.optimizer.learning_rate = 0.5;
        ASSERT_TRUE((*store)->Init(params, init).ok());
        ASSERT_NE((*store)->elastic(), nullptr);
        body(r, **store, grads);
      });
    }
    for (std::thread& t : threads) t.join();
    return weights;
  }

  // Every server proposes generation 1; the highest step taken is then `highest`.
  void ProposeEverywhere(int64_t highest) {
    for (auto& gate : gates_) {
      absl::StatusOr<elastic::MembershipGate::Proposal> p = gate->Propose(1);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_EQ(p->highest_step, highest);
    }
  }

  InProcessServers servers_;
  std::vector<std::unique_ptr<elastic::MembershipGate>> gates_;
  std::atomic<int> refused_{0};
};

// sgd, lr 0.5, mean gradient (0.125 + 0.25) / 2 each step, from 0.5.
float After(int steps) { return 0.5f - static_cast<float>(steps) * 0.5f * 0.1875f; }

TEST_F(ElasticPushTest, APushHeldByAPendingChangeIsSentAgainUntilTheChangeIsDecided) {
  absl::Notification proposed;
  const auto weights = Run(Options(), [&](int r, DistKVStore& store, std::vector<const float*>& grads) {
    // Step 0's pull is answered once both pushed it: then step 1 is held everywhere.
    ASSERT_TRUE(store.PushPull(0, grads).ok());
    if (r == 0) {
      ProposeEverywhere(0);
      proposed.Notify();
    }
    proposed.WaitForNotification();
    std::thread decide;
    if (r == 0) {
      decide = std::thread([this] {
        while (refused_.load() < 6) absl::SleepFor(absl::Milliseconds(1));
        for (auto& gate : gates_) EXPECT_TRUE(gate->Abort(1).ok());
      });
    }
    const absl::Status st = store.PushPull(1, grads);
    if (decide.joinable()) decide.join();
    ASSERT_TRUE(st.ok()) << st;
  });
  EXPECT_GE(refused_.load(), 6);
  for (const auto& w : weights) {
    for (const auto& param : w) EXPECT_THAT(param, ::testing::Each(After(2)));
  }
}

TEST_F(ElasticPushTest, AHeldPushGivesUpAtTheSyncTimeoutNamingThePendingChange) {
  absl::Notification proposed;
  Run(Options(absl::Milliseconds(500)), [&](int r, DistKVStore& store, std::vector<const float*>& grads) {
    ASSERT_TRUE(store.PushPull(0, grads).ok());
    if (r == 0) {
      ProposeEverywhere(0);
      proposed.Notify();
    }
    proposed.WaitForNotification();
    const absl::Status st = store.PushPull(1, grads);
    EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
    EXPECT_THAT(st.message(), HasSubstr("step 1"));
    EXPECT_THAT(st.message(), HasSubstr("membership change to generation 1 pending"));
    EXPECT_FALSE(IsMembershipChanged(st));
  });
}

TEST_F(ElasticPushTest, APushRefusedMembershipChangedEndsTheStepAndIsRedoneInTheNewGeneration) {
  absl::Notification committed;
  const auto weights = Run(Options(), [&](int r, DistKVStore& store, std::vector<const float*>& grads) {
    ASSERT_TRUE(store.PushPull(0, grads).ok());
    if (r == 0) {
      ProposeEverywhere(0);
      for (auto& gate : gates_) ASSERT_TRUE(gate->Commit(1, {1, {0, 1}}).ok());
      committed.Notify();
    }
    committed.WaitForNotification();
    const absl::Status refused = store.PushPull(1, grads);
    EXPECT_TRUE(IsMembershipChanged(refused)) << refused;
    EXPECT_FALSE(IsRollback(refused));
    EXPECT_EQ(MembershipChangedStep(refused), 1);
    EXPECT_THAT(refused.message(), HasSubstr("membership changed from step 1: generation 1, workers {0,1}"));
    // The weights are still those of version 1: the step is redone on them, tagged.
    EXPECT_EQ(store.elastic()->membership_generation(), 0);
    store.elastic()->SetMembershipGeneration(1);
    const absl::Status redone = store.PushPull(1, grads);
    ASSERT_TRUE(redone.ok()) << redone;
  });
  for (const auto& w : weights) {
    for (const auto& param : w) EXPECT_THAT(param, ::testing::Each(After(2)));
  }
}

TEST(ElasticPushOptionsTest, AStoreOfAFixedJobHasNoElasticPart) {
  InProcessServers servers(1);
  FakeJob job(1, servers.endpoints());
  DistOptions o;
  o.connect_timeout = absl::Seconds(1);
  auto store = DistKVStore::Connect(o, job.worker(0), servers.factory());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->elastic(), nullptr);
}

}  // namespace
}  // namespace dtrain::worker
