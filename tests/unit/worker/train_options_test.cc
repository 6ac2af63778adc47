// The worker's training flags: MXNet's defaults, range checks naming the flag.
#include "services/worker/train_options.h"

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

TEST(TrainOptionsTest, DefaultsAreMxnetsAndBadValuesNameTheFlag) {
  TrainOptions o;
  EXPECT_DOUBLE_EQ(o.lr, 0.05);
  EXPECT_DOUBLE_EQ(o.mom, 0.9);
  EXPECT_EQ(o.batch_size, 64);
  ASSERT_TRUE(FinishTrainFlags(&o).ok());
  EXPECT_EQ(o.lr_step_epoch_list, std::vector<int64_t>{10});

  auto check = [](auto mutate, const std::string& flag) {
    TrainOptions t;
    mutate(t);
    absl::Status s = FinishTrainFlags(&t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(flag), absl::string_view::npos) << s.message();
  };
  check([](TrainOptions& t) { t.kv_store = "dist_bogus"; }, "--kv-store");
  check([](TrainOptions& t) { t.batch_size = 0; }, "--batch-size");
  check([](TrainOptions& t) { t.optimizer = "rmsprop"; }, "--optimizer");
  check([](TrainOptions& t) { t.lr_step_epochs = "a,b"; }, "--lr-step-epochs");
  check([](TrainOptions& t) { t.load_epoch = 2; }, "--load-epoch");  // no prefix
  check([](TrainOptions& t) { t.mom = 1.0; }, "--mom");
  check([](TrainOptions& t) { t.sync_timeout_s = 0; }, "--sync-timeout");
  check([](TrainOptions& t) { t.sync_timeout_s = 86401; }, "--sync-timeout");  // over the servers' cap
}

}  // namespace
}  // namespace dtrain::worker
