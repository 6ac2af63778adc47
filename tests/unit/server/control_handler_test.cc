// ControlHandler: the parameter server's control calls on a ShardStore, without gRPC
// (what PsService's Configure, InitKeys, GetState and GetVersions answer, codes and
// texts included).
#include "services/server/control_handler.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/kv/tensor_codec.h"

namespace dtrain::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::ConfigureRequest SyncRequest(int num_workers) {
  v1::ConfigureRequest req;
  req.set_mode(v1::KV_STORE_MODE_DIST_SYNC);
  req.set_num_workers(num_workers);
  req.mutable_optimizer()->set_learning_rate(0.5);
  return req;
}

void AddKey(v1::InitKeysRequest* req, uint64_t key, const std::vector<float>& values, int64_t version = 0) {
  v1::KeyInit* k = req->add_keys();
  k->set_key(key);
  k->add_shape(static_cast<int64_t>(values.size()));
  k->set_dtype(v1::DTYPE_FLOAT32);
  k->set_values(kv::FloatsToBytes(values.data(), static_cast<int64_t>(values.size())));
  k->set_version(version);
}

// A store configured for `num_workers` sync workers holding keys 5 ({1, 2, 3}) and 9
// ({4}, version 3).
class ControlHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(control_.Configure(SyncRequest(2)).ok());
    v1::InitKeysRequest init;
    AddKey(&init, 5, {1, 2, 3});
    AddKey(&init, 9, {4}, 3);
    ASSERT_TRUE(control_.InitKeys(init).ok());
  }

  kv::ShardStore store_;
  ControlHandler control_{&store_, ControlOptions{}};
};

TEST(ControlHandlerConfigureTest, SetsTheStoreUpWithProtoZerosAsDefaults) {
  kv::ShardStore store;
  ControlHandler control(&store, ControlOptions{});
  ASSERT_TRUE(control.Configure(SyncRequest(3)).ok());
  kv::StoreConfig config;
  ASSERT_TRUE(store.GetConfig(&config));
  EXPECT_EQ(config.mode, kv::MergeMode::kSync);
  EXPECT_EQ(config.num_workers, 3);
  EXPECT_EQ(config.optimizer.name, "sgd");
  EXPECT_EQ(config.optimizer.learning_rate, 0.5);
  EXPECT_EQ(config.optimizer.lr_factor, 1.0);
  EXPECT_EQ(config.optimizer.rescale_grad, 1.0);
  EXPECT_TRUE(config.keep_previous_version) << "a sync job keeps each key's previous weights";
  EXPECT_EQ(config.pull_compression, kv::CompressionType::kNone);
}

TEST(ControlHandlerConfigureTest, AsyncKeepsNoPreviousVersionAndSspItsStaleness) {
  kv::ShardStore async_store;
  v1::ConfigureRequest async = SyncRequest(2);
  async.set_mode(v1::KV_STORE_MODE_DIST_ASYNC);
  ASSERT_TRUE(ControlHandler(&async_store, {}).Configure(async).ok());
  kv::StoreConfig config;
  ASSERT_TRUE(async_store.GetConfig(&config));
  EXPECT_EQ(config.mode, kv::MergeMode::kAsync);
  EXPECT_FALSE(config.keep_previous_version);

  kv::ShardStore ssp_store;
  v1::ConfigureRequest ssp = SyncRequest(2);
  ssp.set_mode(v1::KV_STORE_MODE_DIST_SSP);
  ssp.set_staleness(2);
  ASSERT_TRUE(ControlHandler(&ssp_store, {}).Configure(ssp).ok());
  ASSERT_TRUE(ssp_store.GetConfig(&config));
  EXPECT_EQ(config.mode, kv::MergeMode::kSsp);
  EXPECT_EQ(config.staleness, 2);
}

TEST(ControlHandlerConfigureTest, RefusesWhatNoServerServesBeforeTouchingTheStore) {
  kv::ShardStore store;
  ControlHandler control(&store, ControlOptions{});
  v1::ConfigureRequest local = SyncRequest(1);
  local.set_mode(v1::KV_STORE_MODE_LOCAL);
  absl::Status s = control.Configure(local);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"local\" is not served by a parameter server"));

  v1::ConfigureRequest long_name = SyncRequest(1);
  long_name.set_kv_store(std::string(65, 'x'));
  EXPECT_EQ(control.Configure(long_name).message(),
            "kv_store has 65 bytes (want dist_sync, dist_device_sync or "
            "dist_async)");
  v1::ConfigureRequest long_optimizer = SyncRequest(1);
  long_optimizer.mutable_optimizer()->set_name(std::string(65, 'o'));
  EXPECT_EQ(control.Configure(long_optimizer).message(), "optimizer.name has 65 bytes (want \"sgd\" or \"adam\")");
  v1::ConfigureRequest many_steps = SyncRequest(1);
  for (int i = 0; i < 10001; ++i) many_steps.mutable_optimizer()->add_lr_steps(i);
  EXPECT_EQ(control.Configure(many_steps).message(), "optimizer.lr_steps has 10001 entries, over the cap of 10000");
  v1::ConfigureRequest packed = SyncRequest(1);
  packed.set_pull_compression(static_cast<v1::Compression>(77));
  s = control.Configure(packed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown pull_compression 77 (want COMPRESSION_NONE, _FP16, _INT8 or _1BIT)");
  EXPECT_FALSE(store.configured());
}

TEST_F(ControlHandlerTest, AnotherSetupIsTheStoresRefusalAndTheSameIsOk) {
  EXPECT_TRUE(control_.Configure(SyncRequest(2)).ok()) << "worker 0 restarted";
  EXPECT_EQ(control_.Configure(SyncRequest(3)).code(), absl::StatusCode::kFailedPrecondition);
}

// The mode travels as v1::KvStoreMode; a request from an older worker names it in
// kv_store instead, and a request naming two different modes is refused.
TEST(ControlHandlerConfigureTest, TakesTheModeEnumOrTheOlderName) {
  v1::ConfigureRequest req;
  req.set_mode(v1::KV_STORE_MODE_DIST_SSP);
  EXPECT_EQ(MergeModeOf(req).value(), kv::MergeMode::kSsp);
  req.set_kv_store("dist_ssp");
  EXPECT_EQ(MergeModeOf(req).value(), kv::MergeMode::kSsp);
  req.set_kv_store("dist_async");
  EXPECT_THAT(std::string(MergeModeOf(req).status().message()), HasSubstr("name different kv-store modes"));
  v1::ConfigureRequest older;
  older.set_kv_store("dist_async");
  EXPECT_EQ(MergeModeOf(older).value(), kv::MergeMode::kAsync);
  v1::ConfigureRequest local;
  local.set_mode(v1::KV_STORE_MODE_LOCAL);
  EXPECT_THAT(std::string(MergeModeOf(local).status().message()), HasSubstr("not served by a parameter server"));
  EXPECT_EQ(MergeModeOf(v1::ConfigureRequest()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ControlHandlerTest, InitKeysRefusesBadKeysAndKeepsTheOnesBefore) {
  v1::InitKeysRequest req;
  AddKey(&req, 11, {7});
  AddKey(&req, 12, {8});
  req.mutable_keys(1)->set_dtype(v1::DTYPE_UNSPECIFIED);
  AddKey(&req, 13, {9});
  absl::Status s = control_.InitKeys(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "key 12: dtype must be DTYPE_FLOAT32, got DTYPE_UNSPECIFIED");
  EXPECT_THAT(store_.Keys(), ElementsAre(5, 9, 11)) << "keys before the refusal stay, none after it is added";
}

TEST_F(ControlHandlerTest, InitKeysRefusesTornFloatsLongChainsAndAnotherShape) {
  v1::InitKeysRequest torn;
  AddKey(&torn, 20, {1});
  torn.mutable_keys(0)->set_values("abcde");
  absl::Status s = control_.InitKeys(torn);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("key 20: values has 5 bytes, not a whole number of float32s"));

  v1::InitKeysRequest chained;
  AddKey(&chained, 21, {1});
  for (int i = 0; i < kMaxChainLength + 1; ++i) chained.mutable_keys(0)->add_chain(i);
  EXPECT_EQ(control_.InitKeys(chained).message(), "key 21: a chain of 65 servers, at most 64");

  v1::InitKeysRequest reshaped;
  AddKey(&reshaped, 5, {1, 2});
  EXPECT_EQ(control_.InitKeys(reshaped).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store_.Keys(), ElementsAre(5, 9));
}

TEST_F(ControlHandlerTest, InitKeysRefusesNonFiniteValuesUnlessAllowed) {
  v1::InitKeysRequest req;
  AddKey(&req, 11, {1, std::numeric_limits<float>::quiet_NaN()});
  absl::Status s = control_.InitKeys(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "key 11: values element 1 is nan (dtrain-server --allow-non-finite accepts it)");

  v1::InitKeysRequest state;
  AddKey(&state, 12, {1});
  const float inf = std::numeric_limits<float>::infinity();
  state.mutable_keys(0)->set_optimizer_state(kv::FloatsToBytes(&inf, 1));
  EXPECT_EQ(control_.InitKeys(state).message(),
            "key 12: optimizer_state element 0 is inf (dtrain-server --allow-non-finite accepts it)");

  ControlHandler lenient(&store_, ControlOptions{/*allow_non_finite=*/true, nullptr});
  EXPECT_TRUE(lenient.InitKeys(req).ok());
  EXPECT_THAT(store_.Keys(), ElementsAre(5, 9, 11));
}

TEST_F(ControlHandlerTest, GetVersionsAnswersEachKeyAndAdmitsTheAskingWorker) {
  v1::GetVersionsRequest req;
  req.add_keys(9);
  req.add_keys(5);
  req.set_worker_rank(1);
  req.set_job_id("job-a");
  req.set_incarnation(2);
  v1::GetVersionsResponse resp;
  ASSERT_TRUE(control_.GetVersions(req, &resp).ok());
  ASSERT_EQ(resp.keys_size(), 2);
  EXPECT_EQ(resp.keys(0).key(), 9u);
  EXPECT_EQ(resp.keys(0).version(), 3);
  EXPECT_EQ(resp.keys(0).last_push_step(), -1);
  EXPECT_EQ(resp.keys(1).key(), 5u);
  EXPECT_EQ(resp.keys(1).version(), 0);
  EXPECT_THAT(store_.WorkerIncarnations(), ElementsAre(0, 2)) << "the incarnation took its rank";
  EXPECT_EQ(store_.job_id(), "job-a");

  // An older incarnation of that rank is fenced.
  req.set_incarnation(1);
  v1::GetVersionsResponse fenced;
  EXPECT_EQ(control_.GetVersions(req, &fenced).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fenced.keys_size(), 0);
}

TEST_F(ControlHandlerTest, GetVersionsOfNoKeysIsAllAndNoRankAdmitsNobody) {
  v1::GetVersionsRequest req;
  req.set_worker_rank(-1);
  req.set_incarnation(5);
  v1::GetVersionsResponse resp;
  ASSERT_TRUE(control_.GetVersions(req, &resp).ok());
  ASSERT_EQ(resp.keys_size(), 2);
  EXPECT_EQ(resp.keys(0).key(), 5u);
  EXPECT_EQ(resp.keys(1).key(), 9u);
  EXPECT_THAT(store_.WorkerIncarnations(), ElementsAre(0, 0));
}

TEST_F(ControlHandlerTest, GetVersionsRefusesMoreKeysThanHeldAndKeysNotHeld) {
  v1::GetVersionsRequest many;
  for (uint64_t k : {5, 5, 9}) many.add_keys(k);
  v1::GetVersionsResponse resp;
  absl::Status s = control_.GetVersions(many, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "GetVersions asks for 3 keys but this server holds 2");
  v1::GetVersionsRequest unknown;
  unknown.add_keys(77);
  EXPECT_EQ(control_.GetVersions(unknown, &resp).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(resp.keys_size(), 0);
}

TEST_F(ControlHandlerTest, StateKeysAreAllHeldOrThoseAskedForIfHeld) {
  EXPECT_THAT(control_.StateKeys(v1::GetStateRequest()).value(), ElementsAre(5, 9));
  v1::GetStateRequest one;
  one.add_keys(9);
  EXPECT_THAT(control_.StateKeys(one).value(), ElementsAre(9));

  v1::GetStateRequest duplicates;
  for (uint64_t k : {9, 9, 5}) duplicates.add_keys(k);
  absl::Status s = control_.StateKeys(duplicates).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "GetState asks for 3 keys but this server holds 2");
  v1::GetStateRequest missing;
  missing.add_keys(77);
  s = control_.StateKeys(missing).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "key 77 is not held by this server");
}

TEST_F(ControlHandlerTest, KeyStateOfIsTheKeysSnapshot) {
  v1::KeyState msg;
  msg.set_key(1234);  // what was in the message before is gone
  ASSERT_TRUE(control_.KeyStateOf(5, &msg).ok());
  EXPECT_EQ(msg.key(), 5u);
  EXPECT_THAT(msg.shape(), ElementsAre(3));
  EXPECT_EQ(msg.dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(msg.version(), 0);
  std::vector<float> values;
  ASSERT_TRUE(kv::BytesToFloats(msg.values(), &values).ok());
  EXPECT_THAT(values, ElementsAre(1, 2, 3));
  EXPECT_TRUE(msg.optimizer_state().empty()) << "plain sgd keeps no state";
  EXPECT_EQ(control_.KeyStateOf(77, &msg).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dtrain::server
