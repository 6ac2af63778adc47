// DistKVStore without sockets: workers are threads, servers are ShardStores behind
// in-process channels (support/in_process_server.h). Each test checks the weights the
// workers end with against a ShardStore fed the same gradients directly, bit for bit.
#include "services/worker/kv/dist_kvstore.h"

#include <cmath>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/worker/kv/push_compressor.h"
#include "tests/unit/worker/kv/support/in_process_server.h"

namespace dtrain::worker {
namespace {

using ::testing::AllOf;
using testing::FakeJob;
using ::testing::HasSubstr;
using testing::InProcessServers;

// Three parameters; with keys of at most 16 elements they are cut into 1 + 3 + 8 keys
// spread over the servers.
const std::vector<int64_t> kSizes = {6, 35, 120};
constexpr int kWorkers = 2;

kv::OptimizerOptions Sgd() {
  kv::OptimizerOptions o;
  o.name = "sgd";
  o.learning_rate = 0.25;
  o.momentum = 0.5;
  return o;
}

float Grad(int rank, int64_t step, size_t param, int64_t i) {
  return std::sin(static_cast<float>(rank * 7 + step * 3 + static_cast<int64_t>(param) * 5 + i) * 0.37f);
}

std::vector<float> Initial(size_t param) {
  std::vector<float> w(static_cast<size_t>(kSizes[param]));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i) - static_cast<float>(param);
  return w;
}

// One worker's parameters and gradients.
struct Model {
  std::vector<std::vector<float>> weights, grads;
  std::vector<ParamRef> params;

  // Rank 0 holds the initial weights; the others garbage, which Init replaces.
  explicit Model(int rank) {
    for (size_t p = 0; p < kSizes.size(); ++p) {
      weights.push_back(rank == 0 ? Initial(p) : std::vector<float>(static_cast<size_t>(kSizes[p]), 99.0f));
      grads.emplace_back(static_cast<size_t>(kSizes[p]));
    }
    for (size_t p = 0; p < kSizes.size(); ++p) {
      params.push_back({"p" + std::to_string(p), {kSizes[p]}, weights[p].data(), kSizes[p]});
    }
  }
  std::vector<const float*> Grads(int rank, int64_t step) {
    std::vector<const float*> out;
    for (size_t p = 0; p < kSizes.size(); ++p) {
      for (int64_t i = 0; i < kSizes[p]; ++i) grads[p][static_cast<size_t>(i)] = Grad(rank, step, p, i);
      out.push_back(grads[p].data());
    }
    return out;
  }
};

// What the servers must compute: one key per parameter (the ops are elementwise, so how
// the keys are cut does not change a bit), each worker's gradient as the server gets it
// (`wire`: a compressed push unpacked).
std::vector<std::vector<float>> Reference(int64_t steps,
                                          const std::function<std::vector<float>(int, int64_t, size_t)>& wire,
                                          kv::CompressionType pull_compression = kv::CompressionType::kNone) {
  kv::ShardStore store;
  kv::StoreConfig config;
  config.num_workers = kWorkers;
  config.optimizer = Sgd();
  config.pull_compression = pull_compression;
  EXPECT_TRUE(store.Configure(config).ok());
  for (size_t p = 0; p < kSizes.size(); ++p) {
    const std::vector<float> w = Initial(p);
    EXPECT_TRUE(store.InitKey(p, {kSizes[p]}, w.data(), kSizes[p]).ok());
  }
  for (int64_t step = 0; step < steps; ++step) {
    for (size_t p = 0; p < kSizes.size(); ++p) {
      for (int r = 0; r < kWorkers; ++r) {
        const std::vector<float> g = wire(r, step, p);
        EXPECT_TRUE(store.Push(r, step, p, g.data(), kSizes[p]).ok());
      }
    }
  }
  std::vector<std::vector<float>> out(kSizes.size());
  for (size_t p = 0; p < kSizes.size(); ++p) {
    store.Pull(0, p, steps, absl::InfiniteFuture(),
               [&out, p](const absl::Status& s, int64_t, const float* data, int64_t numel) {
                 EXPECT_TRUE(s.ok()) << s;
                 out[p].assign(data, data + numel);
               });
  }
  return out;
}

std::vector<float> Plain(int rank, int64_t step, size_t param) {
  std::vector<float> g(static_cast<size_t>(kSizes[param]));
  for (int64_t i = 0; i < kSizes[param]; ++i) g[static_cast<size_t>(i)] = Grad(rank, step, param, i);
  return g;
}

DistOptions Options() {
  DistOptions o;
  o.max_chunk_elems = 16;
  o.connect_timeout = absl::Seconds(1);
  o.sync_timeout = absl::Seconds(20);
  return o;
}

// Runs `body` as each worker, in threads, on a store connected and initialised; the
// models end in `models`.
void RunWorkers(InProcessServers& servers, const DistOptions& options, std::vector<Model>& models,
                const std::function<void(int, DistKVStore&, Model&)>& body, DistKVStore::Clock clock = absl::Now) {
  FakeJob job(kWorkers, servers.endpoints());
  for (int r = 0; r < kWorkers; ++r) models.emplace_back(r);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorkers; ++r) {
    threads.emplace_back([&, r] {
      auto store = DistKVStore::Connect(options, job.worker(r), servers.factory(), clock);
      ASSERT_TRUE(store.ok()) << store.status();
      KVStoreInit init;
      init.optimizer = Sgd();
      ASSERT_TRUE((*store)->Init(models[static_cast<size_t>(r)].params, init).ok());
      body(r, **store, models[static_cast<size_t>(r)]);
    });
  }
  for (std::thread& t : threads) t.join();
}

void ExpectWeights(const std::vector<Model>& models, const std::vector<std::vector<float>>& want) {
  for (size_t r = 0; r < models.size(); ++r) {
    for (size_t p = 0; p < kSizes.size(); ++p)
      EXPECT_EQ(models[r].weights[p], want[p]) << "worker " << r << " param " << p;
  }
}

constexpr int64_t kSteps = 3;

TEST(DistKVStoreTest, TwoWorkersTwoServersSyncStepsGiveTheShardStoresWeights) {
  InProcessServers servers(2);
  std::vector<Model> models;
  RunWorkers(servers, Options(), models, [](int r, DistKVStore& store, Model& m) {
    for (int64_t step = 0; step < kSteps; ++step) ASSERT_TRUE(store.PushPull(step, m.Grads(r, step)).ok());
    EXPECT_GT(store.stats().bytes_pushed, 0);
    EXPECT_EQ(store.stats().bytes_pushed, store.stats().bytes_pushed_uncompressed);
  });
  ExpectWeights(models, Reference(kSteps, Plain));
  // The keys were spread: both servers merged pushes.
  EXPECT_GT(servers.server(0).store().num_keys(), 0);
  EXPECT_GT(servers.server(1).store().num_keys(), 0);
}

TEST(DistKVStoreTest, EarlyPushesAndLazyPullsGiveTheWeightsOfPushPull) {
  InProcessServers servers(2);
  std::vector<Model> models;
  RunWorkers(servers, Options(), models, [](int r, DistKVStore& store, Model& m) {
    for (int64_t step = 0; step < kSteps; ++step) {
      std::vector<const float*> grads = m.Grads(r, step);
      if (r == 1) {  // the other worker steps plainly: both meet on the servers
        ASSERT_TRUE(store.PushPull(step, grads).ok());
        continue;
      }
      // As backward hands them over: the last parameter first, one of them twice.
      std::unique_ptr<OpenStep> open = store.BeginStep(step);
      ASSERT_TRUE(open->pushes_early());
      ASSERT_TRUE(open->Offer(2, grads[2]).ok());
      ASSERT_TRUE(open->Offer(0, grads[0]).ok());
      ASSERT_TRUE(open->Offer(0, grads[0]).ok());
      absl::StatusOr<std::unique_ptr<PendingStep>> pending = open->Send(grads);
      ASSERT_TRUE(pending.ok()) << pending.status();
      EXPECT_EQ(store.SaveStates().status().code(), absl::StatusCode::kFailedPrecondition)
          << "nothing but the handle's waits while the pulls are out";
      EXPECT_EQ(store.BeginStep(step + 1)->Offer(0, grads[0]).code(), absl::StatusCode::kFailedPrecondition)
          << "an early push would overwrite the pending step's tickets";
      for (size_t p = 0; p < kSizes.size(); ++p) ASSERT_TRUE((*pending)->WaitParam(p, absl::InfiniteFuture()).ok());
      EXPECT_FALSE((*pending)->done());
      ASSERT_TRUE((*pending)->Wait(absl::InfiniteFuture()).ok());
      EXPECT_TRUE((*pending)->done());
    }
  });
  ExpectWeights(models, Reference(kSteps, Plain));
}

TEST(DistKVStoreTest, WaitParamReturnsOnceItsWeightsAreInAndAnExpiredDeadlineNamesWhatIsMissing) {
  InProcessServers servers(2);
  std::vector<Model> models;
  absl::Notification offered, checked;
  RunWorkers(servers, Options(), models, [&](int r, DistKVStore& store, Model& m) {
    std::vector<const float*> grads = m.Grads(r, 0);
    if (r == 1) {
      // Only parameter 0's gradient goes out: its keys merge, the others wait for it.
      std::unique_ptr<OpenStep> open = store.BeginStep(0);
      ASSERT_TRUE(open->Offer(0, grads[0]).ok());
      offered.Notify();
      checked.WaitForNotification();
      return;
    }
    absl::StatusOr<std::unique_ptr<PendingStep>> pending = store.StartStep(0, grads);
    ASSERT_TRUE(pending.ok()) << pending.status();
    offered.WaitForNotification();
    ASSERT_TRUE((*pending)->WaitParam(0, absl::InfiniteFuture()).ok());
    EXPECT_EQ(m.weights[0], Reference(1, Plain)[0]) << "parameter 0's weights of step 0 are in";
    EXPECT_FALSE((*pending)->done());
    const absl::Status late = (*pending)->WaitParam(2, absl::Now());
    EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
    EXPECT_THAT(late.message(),
                AllOf(HasSubstr("step 0: parameter 2 (p2) not in by the deadline"), HasSubstr("unanswered by server "),
                      HasSubstr("of 12 keys of the step still out"), HasSubstr("on servers 0, 1")));
    EXPECT_EQ((*pending)->Wait(absl::InfiniteFuture()), late) << "the step failed with it";
    EXPECT_TRUE((*pending)->done());
    EXPECT_TRUE(store.SaveStates().ok()) << "nothing of the failed step is outstanding";
    checked.Notify();
  });
}

TEST(DistKVStoreTest, AWaitWhoseDeadlinePassesFailsTheStepNamingTheParameterAndServers) {
  InProcessServers servers(2);
  std::vector<Model> models;
  RunWorkers(servers, Options(), models, [&](int r, DistKVStore& store, Model& m) {
    if (r == 1) return;  // worker 1 never pushes step 0
    absl::StatusOr<std::unique_ptr<PendingStep>> pending = store.StartStep(0, m.Grads(r, 0));
    ASSERT_TRUE(pending.ok()) << pending.status();
    const absl::Status s = (*pending)->Wait(absl::Now() + absl::Milliseconds(20));
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(s.message(), AllOf(HasSubstr("step 0: parameter 0 (p0) not in by the deadline: key 0 unanswered by "
                                             "server 0 at inprocess:0"),
                                   HasSubstr("12 of 12 keys of the step still out, on servers 0, 1")));
    EXPECT_GT(store.last_timing().wait + store.last_timing().pull, 0) << "the blocked time is counted";
  });
}

TEST(DistKVStoreTest, AKilledServersReplicaGivesTheWeights) {
  InProcessServers servers(2);
  DistOptions options = Options();
  options.replication = 2;
  std::vector<Model> models;
  absl::Mutex mu;
  int done_step0 = 0;
  RunWorkers(servers, options, models, [&](int r, DistKVStore& store, Model& m) {
    ASSERT_TRUE(store.PushPull(0, m.Grads(r, 0)).ok());
    {
      // Server 0 dies between the steps, once both workers are past step 0.
      absl::MutexLock lock(&mu);
      if (++done_step0 == kWorkers) servers.server(0).Kill();
      mu.Await(absl::Condition(
          +[](int* done) { return *done == kWorkers; }, &done_step0));
    }
    for (int64_t step = 1; step < kSteps; ++step) ASSERT_TRUE(store.PushPull(step, m.Grads(r, step)).ok());
    EXPECT_TRUE(store.SaveStates().ok()) << "the states come from server 1";
  });
  ExpectWeights(models, Reference(kSteps, Plain));
}

TEST(DistKVStoreTest, WithoutReplicasAKilledServerFailsTheStepNamingIt) {
  InProcessServers servers(2);
  std::vector<Model> models;
  absl::Barrier* initialised = new absl::Barrier(kWorkers);
  RunWorkers(servers, Options(), models, [&](int r, DistKVStore& store, Model& m) {
    // Once both are past Init (whose pulls server 1 must answer), server 1 dies.
    if (initialised->Block()) {
      delete initialised;
      servers.server(1).Kill();
    }
    const absl::Status s = store.PushPull(0, m.Grads(r, 0));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("server 1 at inprocess:1"));
  });
}

TEST(DistKVStoreTest, AStepWhosePeerNeverPushesFailsAtTheSyncTimeoutNamingIt) {
  // Time moves 50 ms at each reading: the 2 s sync timeout passes in a few dozen.
  testing::TickingClock clock(absl::Milliseconds(50));
  InProcessServers servers(2, clock.AsClock());
  DistOptions options = Options();
  options.sync_timeout = absl::Seconds(2);
  std::vector<Model> models;
  RunWorkers(
      servers, options, models,
      [](int r, DistKVStore& store, Model& m) {
        if (r == 1) return;  // worker 1 never pushes step 0
        const absl::Status s = store.PushPull(0, m.Grads(r, 0));
        EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
        EXPECT_THAT(s.message(), AllOf(HasSubstr("step 0"), HasSubstr("waiting for worker 1")));
      },
      clock.AsClock());
}

TEST(DistKVStoreTest, PackedPullsKeepTheWorkersOnTheServersWeights) {
  InProcessServers servers(2);
  DistOptions options = Options();
  options.pull_compression = kv::CompressionType::kFp16;
  std::vector<Model> models;
  RunWorkers(servers, options, models, [](int r, DistKVStore& store, Model& m) {
    for (int64_t step = 0; step < kSteps; ++step) ASSERT_TRUE(store.PushPull(step, m.Grads(r, step)).ok());
    EXPECT_LT(store.stats().bytes_pulled * 3 / 2, store.stats().bytes_pulled_uncompressed)
        << "the steps' changes came packed (the start-up pull did not)";
  });
  // The servers' weights, which moved by exactly the unpacked changes the workers added.
  ExpectWeights(models, Reference(kSteps, Plain, kv::CompressionType::kFp16));
}

TEST(DistKVStoreTest, AReplacementRedoesTheStepItsPredecessorLeftHalfDoneBitForBit) {
  InProcessServers servers(2);
  FakeJob job(kWorkers, servers.endpoints());
  std::vector<Model> models;
  for (int r = 0; r < kWorkers; ++r) models.emplace_back(r);
  KVStoreInit init;
  init.optimizer = Sgd();
  std::unique_ptr<DistKVStore> w0;
  absl::Notification step2_sent;
  std::thread first([&] {
    auto store = DistKVStore::Connect(Options(), job.worker(0), servers.factory());
    ASSERT_TRUE(store.ok()) << store.status();
    w0 = *std::move(store);
    ASSERT_TRUE(w0->Init(models[0].params, init).ok());
    for (int64_t step = 0; step < 2; ++step) ASSERT_TRUE(w0->PushPull(step, models[0].Grads(0, step)).ok());
    // Step 2 waits for worker 1, whose first process dies in it; its replacement redoes it.
    absl::StatusOr<std::unique_ptr<PendingStep>> step2 = w0->StartStep(2, models[0].Grads(0, 2));
    ASSERT_TRUE(step2.ok()) << step2.status();
    step2_sent.Notify();
    ASSERT_TRUE((*step2)->Wait(absl::InfiniteFuture()).ok());
  });
  {
    Model dying(1);
    auto store = DistKVStore::Connect(Options(), job.worker(1), servers.factory());
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Init(dying.params, init).ok());
    for (int64_t step = 0; step < 2; ++step) ASSERT_TRUE((*store)->PushPull(step, dying.Grads(1, step)).ok());
    // Only parameter 0's gradient of step 2 goes out: its key merges step 2 with worker
    // 0's, the others wait at version 2.
    step2_sent.WaitForNotification();
    std::unique_ptr<OpenStep> open = (*store)->BeginStep(2);
    ASSERT_TRUE(open->Offer(0, dying.Grads(1, 2)[0]).ok());
  }
  std::vector<kv::KeyVersion> versions;
  ASSERT_TRUE(servers.server(0).store().Versions({0}, -1, &versions).ok()) << "parameter 0 is key 0 on server 0";
  ASSERT_EQ(versions[0].version, 3) << "the replacement pulls its previous version";
  auto store = DistKVStore::Connect(Options(), job.replacement(1), servers.factory());
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Init(models[1].params, init).ok());
  ASSERT_NE((*store)->recovery(), nullptr);
  ASSERT_EQ((*store)->recovery()->resume_step(), 2) << "the lowest version any key is at";
  ASSERT_TRUE((*store)->PushPull(2, models[1].Grads(1, 2)).ok());
  first.join();
  ExpectWeights(models, Reference(kSteps, Plain));
}

// A worker joining the running job (DistOptions::join_step, docs/elastic.md) with the
// job's model takes the weights of its join step; one with another model is refused
// before it pulls or pushes anything, naming the mismatch: a parameter the job does not
// have, or a parameter of another size.
TEST(DistKVStoreTest, AJoinerWithAnotherModelIsRefusedNamingTheMismatch) {
  InProcessServers servers(2);
  std::vector<Model> models;
  RunWorkers(servers, Options(), models, [](int r, DistKVStore& kv, Model& m) {
    for (int64_t step = 0; step < 2; ++step) ASSERT_TRUE(kv.PushPull(step, m.Grads(r, step)).ok());
  });
  struct Case {
    std::vector<int64_t> sizes;
    std::string expected;  // "" when it joins
  };
  const std::vector<Case> cases = {
      {kSizes, ""},
      {{6, 35, 120, 4},
       "this worker's model is not the job's: its 13 keys against the servers' 12; the servers lack 1"},
      {{6, 35, 121}, "returned 32 bytes, want 36 (a joiner must train the job's model"},
  };
  for (const Case& c : cases) {
    FakeJob job(kWorkers, servers.endpoints());
    DistOptions options = Options();
    options.join_step = 2;
    auto store = DistKVStore::Connect(options, job.worker(1), servers.factory());
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<std::vector<float>> weights;
    for (int64_t n : c.sizes) weights.emplace_back(static_cast<size_t>(n), 0.0f);
    std::vector<ParamRef> params;
    for (size_t p = 0; p < c.sizes.size(); ++p) {
      params.push_back({"p" + std::to_string(p), {c.sizes[p]}, weights[p].data(), c.sizes[p]});
    }
    KVStoreInit init;
    init.optimizer = Sgd();
    const absl::Status s = (*store)->Init(params, init);
    if (c.expected.empty()) {
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_EQ(weights, models[0].weights) << "the weights of step 2, which both workers pulled";
    } else {
      EXPECT_FALSE(s.ok());
      EXPECT_THAT(std::string(s.message()), HasSubstr(c.expected)) << s;
    }
  }
}

TEST(DistKVStoreTest, TwoBitPushesMergeAsTheServerUnpacksThem) {
  InProcessServers servers(2);
  DistOptions options = Options();
  options.compression = {kv::CompressionType::kTwoBit, 0.5f};
  std::vector<Model> models;
  RunWorkers(servers, options, models, [](int r, DistKVStore& store, Model& m) {
    for (int64_t step = 0; step < kSteps; ++step) ASSERT_TRUE(store.PushPull(step, m.Grads(r, step)).ok());
    EXPECT_LT(store.stats().bytes_pushed * 8, store.stats().bytes_pushed_uncompressed) << "2 bits of 32 sent";
  });
  // What the servers merged: each worker's gradient through the same codec and error
  // feedback, key by key (residuals are per key), unpacked.
  const kv::Placement placement = kv::ComputePlacement(kSizes, 2, 16);
  std::vector<PushCompressor> workers;
  for (int r = 0; r < kWorkers; ++r) {
    workers.emplace_back(options.compression, options.gradient_scale);
    workers.back().Reset(placement);
  }
  std::vector<std::vector<std::vector<float>>> wire(kWorkers);  // [rank][step * params + param]
  auto codec = kv::MakeCodec(workers[0].wire_spec());
  for (int64_t step = 0; step < kSteps; ++step) {
    for (int r = 0; r < kWorkers; ++r) {
      for (size_t p = 0; p < kSizes.size(); ++p) {
        const std::vector<float> g = Plain(r, step, p);
        std::vector<float> unpacked(g.size());
        for (size_t i = 0; i < placement.slices.size(); ++i) {
          const kv::KeySlice& s = placement.slices[i];
          if (s.param_index != p) continue;
          const PushData d = workers[static_cast<size_t>(r)].Pack(i, g.data() + s.offset, s.length);
          ASSERT_TRUE(codec->Decode(d.bytes, d.size, unpacked.data() + s.offset, s.length).ok());
        }
        wire[static_cast<size_t>(r)].push_back(unpacked);
      }
    }
  }
  ExpectWeights(models, Reference(kSteps, [&](int r, int64_t step, size_t p) {
                  return wire[static_cast<size_t>(r)][static_cast<size_t>(step) * kSizes.size() + p];
                }));
}

// dist_ssp: worker 0 runs two steps ahead while worker 1 has not started, so its
// gradients of steps 1 and 2 were computed on the weights of version 0; its pushes say
// so (lag 1, then 2, at most the staleness) and the servers weigh them by it. Worker 1,
// never ahead, pushes lag 0. --no-weigh-stale sends every push as fresh.
TEST(DistKVStoreTest, SspPushesSayHowStaleTheirWeightsWereAndTheServersWeighThem) {
  for (const bool weigh : {true, false}) {
    SCOPED_TRACE(weigh ? "weigh_stale" : "no weigh_stale");
    InProcessServers servers(2);
    DistOptions options = Options();
    options.mode = KVStoreMode::kDistSsp;
    options.staleness = 2;
    options.weigh_stale = weigh;
    absl::Notification ahead, caught_up;
    std::vector<Model> models;
    RunWorkers(servers, options, models, [&](int r, DistKVStore& store, Model& m) {
      if (r == 0) {
        for (int64_t step = 0; step < 2; ++step) ASSERT_TRUE(store.PushPull(step, m.Grads(r, step)).ok());
        ahead.Notify();
        caught_up.WaitForNotification();
        ASSERT_TRUE(store.PushPull(2, m.Grads(r, 2)).ok());
      } else {
        ahead.WaitForNotification();
        for (int64_t step = 0; step < 3; ++step) ASSERT_TRUE(store.PushPull(step, m.Grads(r, step)).ok());
        caught_up.Notify();
      }
      ASSERT_TRUE(store.Settle(3).ok());
    });
    // The same pushes, with the lags the workers had, into one SSP store per parameter.
    kv::ShardStore reference;
    kv::StoreConfig config;
    config.mode = kv::MergeMode::kSsp;
    config.staleness = 2;
    config.num_workers = kWorkers;
    config.optimizer = Sgd();
    ASSERT_TRUE(reference.Configure(config).ok());
    const std::vector<std::tuple<int, int64_t, int64_t>> pushes = {{0, 0, 0}, {0, 1, 1}, {1, 0, 0},
                                                                   {1, 1, 0}, {1, 2, 0}, {0, 2, 2}};
    std::vector<std::vector<float>> want(kSizes.size());
    for (size_t p = 0; p < kSizes.size(); ++p) {
      const std::vector<float> w = Initial(p);
      ASSERT_TRUE(reference.InitKey(p, {kSizes[p]}, w.data(), kSizes[p]).ok());
      for (auto [r, step, lag] : pushes) {
        const std::vector<float> g = Plain(r, step, p);
        ASSERT_TRUE(reference.Push(r, step, p, g.data(), kSizes[p], weigh ? lag : 0).ok());
      }
      reference.Pull(0, p, 3, absl::InfiniteFuture(),
                     [&want, p](const absl::Status& s, int64_t version, const float* data, int64_t numel) {
                       EXPECT_TRUE(s.ok()) << s;
                       EXPECT_EQ(version, 3);
                       want[p].assign(data, data + numel);
                     });
    }
    ExpectWeights(models, want);
  }
}

}  // namespace
}  // namespace dtrain::worker
