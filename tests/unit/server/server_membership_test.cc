// ServerMembership: an elastic job's membership on a parameter server, adopted from the
// scheduler's answer, with a real ShardStore and the real ControlHandler: what a
// Configure gets (--elastic's MAX), what is refused, and each step's lr factor.
#include "services/server/server_membership.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/elastic/membership_proto.h"
#include "common/kv/tensor_codec.h"
#include "services/server/control_handler.h"

namespace dtrain::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

elastic::ElasticSpec Bounds(int min, int max) {
  elastic::ElasticSpec spec;
  spec.min_workers = min;
  spec.max_workers = max;
  return spec;
}

// --elastic 2:4, started with workers {0,1}, lr rule `lr`.
v1::MembershipState State(elastic::ElasticLr lr = elastic::ElasticLr::kScale) {
  elastic::Membership m;
  m.schedule = *elastic::MembershipSchedule::Create(2, 4, {{0, {0, 1}}});
  m.lr = lr;
  m.workers_at_start = 2;
  return elastic::MembershipToProto(m);
}

v1::ConfigureRequest SyncRequest(int num_workers, double lr) {
  v1::ConfigureRequest req;
  req.set_mode(v1::KV_STORE_MODE_DIST_SYNC);
  req.set_num_workers(num_workers);
  req.mutable_optimizer()->set_learning_rate(lr);
  return req;
}

TEST(ServerMembershipTest, AConfigureBeforeTheMembershipCameWaitsThenSaysWhatIsMissing) {
  kv::ShardStore store;
  ServerMembership membership(Bounds(2, 4));
  ControlOptions options;
  options.membership = &membership;
  options.membership_wait = absl::ZeroDuration();
  ControlHandler control(&store, options);
  const absl::Status s = control.Configure(SyncRequest(2, 0.1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("has not had its elastic job's membership from the scheduler within 0"));
  EXPECT_FALSE(store.configured());
  // A push meanwhile is retried, not taken.
  bool pushed = false;
  EXPECT_EQ(membership
                .PushIfAdmitted(0, 0,
                                [&] {
                                  pushed = true;
                                  return absl::OkStatus();
                                })
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_FALSE(pushed);
}

TEST(ServerMembershipTest, WorkerZerosConfigureOfNWorkersSetsTheStoreUpForMax) {
  kv::ShardStore store;
  ServerMembership membership(Bounds(2, 4));
  ASSERT_TRUE(membership.Adopt(State(), &store).ok());
  ControlOptions options;
  options.membership = &membership;
  ControlHandler control(&store, options);
  ASSERT_TRUE(control.Configure(SyncRequest(2, 0.1)).ok());
  kv::StoreConfig config;
  ASSERT_TRUE(store.GetConfig(&config));
  EXPECT_EQ(config.num_workers, 4);
  EXPECT_TRUE(control.Configure(SyncRequest(2, 0.1)).ok());  // worker 0 restarted
  const absl::Status over = control.Configure(SyncRequest(5, 0.1));
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.message(), HasSubstr("Configure asks for 5 workers, outside this elastic job's --elastic 2:4"));
  // The gate decides the merges: worker 3 is not in generation 0.
  v1::InitKeysRequest init;
  v1::KeyInit* k = init.add_keys();
  const std::vector<float> values = {1.0f};
  k->set_key(5);
  k->add_shape(1);
  k->set_dtype(v1::DTYPE_FLOAT32);
  k->set_values(kv::FloatsToBytes(values.data(), 1));
  ASSERT_TRUE(control.InitKeys(init).ok());
  EXPECT_THAT(store.Push(3, 0, 5, values.data(), 1).message(), HasSubstr("is not in generation 0"));
}

TEST(ServerMembershipTest, AMembershipThatBreaksARuleOrOtherBoundsIsRefused) {
  kv::ShardStore store;
  ServerMembership other(Bounds(1, 4));
  const absl::Status bounds = other.Adopt(State(), &store);
  EXPECT_EQ(bounds.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bounds.message(), "the scheduler's membership is for --elastic 2:4, this server has --elastic 1:4");
  EXPECT_EQ(other.gate(), nullptr);

  v1::MembershipState broken = State();
  broken.mutable_generations(0)->add_ranks(7);  // beyond MAX 4
  ServerMembership membership(Bounds(2, 4));
  const absl::Status s = membership.Adopt(broken, &store);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the scheduler's membership of this elastic job is refused"));
  ASSERT_TRUE(membership.Adopt(State(), &store).ok());
  EXPECT_EQ(membership.Adopt(State(), &store).code(), absl::StatusCode::kFailedPrecondition);
}

// SGD with lr 1 from zero: each step's weights move by lr * factor * the step's mean.
std::vector<float> WeightsAfterAJoin(elastic::ElasticLr rule) {
  kv::ShardStore store;
  ServerMembership membership(Bounds(2, 4));
  EXPECT_TRUE(membership.Adopt(State(rule), &store).ok());
  ControlOptions options;
  options.membership = &membership;
  ControlHandler control(&store, options);
  EXPECT_TRUE(control.Configure(SyncRequest(2, 1.0)).ok());
  const std::vector<float> zero = {0.0f, 0.0f};
  EXPECT_TRUE(store.InitKey(5, {2}, zero.data(), 2).ok());
  elastic::MembershipGate* gate = membership.gate();
  auto push = [&](int rank, int64_t step, int generation, std::vector<float> g) {
    EXPECT_TRUE(
        membership.PushIfAdmitted(step, generation, [&] { return store.Push(rank, step, 5, g.data(), 2); }).ok());
  };
  push(0, 0, 0, {1.0f, 2.0f});
  push(1, 0, 0, {1.0f, 2.0f});  // mean {1, 2}, 2 workers of 2: factor 1
  EXPECT_TRUE(gate->Propose(1).ok());
  EXPECT_TRUE(gate->Commit(1, {1, {0, 1, 2}}).ok());  // worker 2 joins from step 1
  EXPECT_EQ(membership.LrFactorAt(0, {}, 1.0), 1.0);
  push(0, 1, 1, {0.0f, 0.0f});
  push(1, 1, 1, {3.0f, 6.0f});
  push(2, 1, 1, {3.0f, 6.0f});  // mean {2, 4}
  std::vector<kv::KeyState> state;
  EXPECT_TRUE(store.Snapshot({5}, &state).ok());
  EXPECT_EQ(state.at(0).version, 2);
  return state.at(0).values;
}

TEST(ServerMembershipTest, EachStepsLrIsScaledByItsGenerationsWorkerCount) {
  EXPECT_THAT(WeightsAfterAJoin(elastic::ElasticLr::kScale), ElementsAre(-1.0f - 1.5f * 2.0f, -2.0f - 1.5f * 4.0f));
  EXPECT_THAT(WeightsAfterAJoin(elastic::ElasticLr::kKeep), ElementsAre(-3.0f, -6.0f));
}

// --lr-step-epochs in an elastic job: the epochs' lengths come from the membership as
// committed (100 examples, batch 10: 2 workers take 5 steps an epoch, 3 take 3), and a
// Configure's epoch_lr is refused where it cannot apply.
TEST(ServerMembershipTest, TheLrStepsFollowTheEpochsTheMembershipMakes) {
  kv::ShardStore store;
  ServerMembership membership(Bounds(2, 4));
  ASSERT_TRUE(membership.Adopt(State(elastic::ElasticLr::kKeep), &store).ok());
  ControlOptions options;
  options.membership = &membership;
  ControlHandler control(&store, options);
  v1::ConfigureRequest req = SyncRequest(2, 1.0);
  req.mutable_optimizer()->set_lr_factor(0.5);
  req.mutable_epoch_lr()->set_num_examples(100);
  req.mutable_epoch_lr()->set_batch_size(10);
  req.mutable_epoch_lr()->add_epochs(1);
  req.mutable_epoch_lr()->add_epochs(2);
  ASSERT_TRUE(control.Configure(req).ok());
  const kv::EpochLrSteps epochs{100, 10, {1, 2}};
  EXPECT_EQ(membership.LrFactorAt(4, epochs, 0.5), 1.0);
  EXPECT_EQ(membership.LrFactorAt(5, epochs, 0.5), 0.5);    // epoch 1: steps 5-9
  EXPECT_EQ(membership.LrFactorAt(10, epochs, 0.5), 0.25);  // epoch 2
  EXPECT_EQ(membership.LrFactorAt(10, {}, 0.5), 1.0);       // no schedule
  // Worker 2 joins from step 7: epoch 1 is steps 5-6, then the 60 examples left over 3
  // (20 each: 2 steps), so epoch 2 starts at step 9, not 10.
  elastic::MembershipGate* gate = membership.gate();
  ASSERT_TRUE(gate->Propose(1).ok());
  ASSERT_TRUE(gate->Commit(1, {7, {0, 1, 2}}).ok());
  EXPECT_EQ(membership.LrFactorAt(6, epochs, 0.5), 0.5);
  EXPECT_EQ(membership.LrFactorAt(8, epochs, 0.5), 0.5);
  EXPECT_EQ(membership.LrFactorAt(9, epochs, 0.5), 0.25);

  // Every Configure must say the same; a server that is not elastic refuses it, and so
  // does a store given both ways of the schedule or epochs out of order.
  v1::ConfigureRequest other = req;
  other.mutable_epoch_lr()->set_epochs(1, 3);
  EXPECT_THAT(control.Configure(other).message(), HasSubstr("epoch_lr [1,2] of 100 examples"));
  kv::ShardStore plain_store;
  ControlHandler plain(&plain_store, ControlOptions());
  EXPECT_THAT(plain.Configure(req).message(), HasSubstr("this one is not elastic"));
  v1::ConfigureRequest both = req;
  both.mutable_optimizer()->add_lr_steps(10);
  kv::ShardStore fresh_store;
  ServerMembership fresh(Bounds(2, 4));
  ASSERT_TRUE(fresh.Adopt(State(), &fresh_store).ok());
  ControlOptions fresh_options;
  fresh_options.membership = &fresh;
  ControlHandler fresh_control(&fresh_store, fresh_options);
  EXPECT_THAT(fresh_control.Configure(both).message(), HasSubstr("give the schedule one way"));
  v1::ConfigureRequest unsorted = req;
  unsorted.mutable_epoch_lr()->set_epochs(1, 1);
  EXPECT_THAT(fresh_control.Configure(unsorted).message(), HasSubstr("want ascending epochs >= 1"));
}

}  // namespace
}  // namespace dtrain::server
