// PackedChange: a key's weight change packed once per step for pull compression. The
// weights move by exactly what the packed bytes unpack to (so a worker adding them to
// its copy gets the store's weights bit for bit), what packing lost stays in the
// residual, and the change is offered only to a worker one version behind.
#include "common/kv/packed_change.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAreArray;

class PackedChangeTest : public ::testing::Test {
 protected:
  std::unique_ptr<GradientCodec> codec_ = MakeCodec({CompressionType::kInt8, 1.0f});
  PackedChange change_;
};

TEST_F(PackedChangeTest, TheWeightsMoveByWhatTheWorkerUnpacks) {
  const std::vector<float> current = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f};
  const std::vector<float> wanted = {1.01f, -2.3f, 0.5f, 2.999f, 0.2f};  // the optimizer's
  std::vector<float> residual(current.size(), 0.0f);
  const int64_t n = static_cast<int64_t>(current.size());
  float* next = change_.Spare(n);
  std::copy(wanted.begin(), wanted.end(), next);
  change_.Pack(*codec_, current.data(), next, residual.data(), n, /*next_version=*/4);
  EXPECT_EQ(change_.version(), 4);

  PullAnswer a{4, next, n};
  change_.Offer(*codec_, /*held_version=*/3, /*current_version=*/4, &a);
  ASSERT_NE(a.delta, nullptr);
  EXPECT_EQ(a.delta_type, CompressionType::kInt8);
  ASSERT_EQ(a.delta_bytes, codec_->PackedBytes(n));
  // A worker holding `current` unpacks and adds: it must land on the store's weights.
  std::vector<float> worker(n);
  ASSERT_TRUE(codec_->Decode(a.delta, a.delta_bytes, worker.data(), n).ok());
  for (int64_t i = 0; i < n; ++i) worker[i] += current[i];
  EXPECT_THAT(std::vector<float>(next, next + n), ElementsAreArray(worker));
  // What packing lost is kept for a later step: weights plus residual are the optimizer's.
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(next[i] + residual[i], wanted[i], 1e-6) << i;
}

TEST_F(PackedChangeTest, OfferedOnlyToAWorkerOneVersionBehindTheHeldChange) {
  const std::vector<float> current = {1.0f, 2.0f};
  std::vector<float> residual(2, 0.0f);
  float* next = change_.Spare(2);
  next[0] = 1.5f, next[1] = 2.5f;
  change_.Pack(*codec_, current.data(), next, residual.data(), 2, /*next_version=*/9);
  for (auto [held, now] : {std::pair<int64_t, int64_t>{-1, 9}, {7, 9}, {8, 10}, {9, 10}}) {
    PullAnswer a{now, next, 2};
    change_.Offer(*codec_, held, now, &a);
    EXPECT_EQ(a.delta, nullptr) << "held " << held << ", current " << now;
    EXPECT_EQ(a.delta_bytes, 0);
  }
  change_.Forget();
  EXPECT_EQ(change_.version(), -1);
  PullAnswer a{9, next, 2};
  change_.Offer(*codec_, 8, 9, &a);
  EXPECT_EQ(a.delta, nullptr);  // a rollback or restart: nothing until the next merge
}

TEST_F(PackedChangeTest, TakeSpareSwapsTheNewWeightsIn) {
  std::vector<float> current = {1.0f, 2.0f};
  float* next = change_.Spare(2);
  next[0] = 3.0f, next[1] = 4.0f;
  change_.TakeSpare(&current);
  EXPECT_THAT(current, ElementsAreArray({3.0f, 4.0f}));
  EXPECT_EQ(change_.Spare(2)[0], 1.0f);  // the old weights' buffer is the next spare
}

}  // namespace
}  // namespace dtrain::kv
