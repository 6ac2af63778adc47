#include "services/worker/dataset.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

data::ImageSet Tiny(int n) {
  data::ImageSet s;
  s.count = n;
  s.rows = s.cols = 2;
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < 4; ++p) s.pixels.push_back(static_cast<uint8_t>(i));
    s.labels.push_back(static_cast<uint8_t>(i % 10));
  }
  return s;
}

TEST(DatasetTest, TensorsAreScaledAndLimited) {
  TensorSet t = ToTensors(Tiny(11), 5);
  EXPECT_EQ(t.size(), 5);
  EXPECT_EQ(t.images.sizes().vec(), (std::vector<int64_t>{5, 1, 2, 2}));
  EXPECT_FLOAT_EQ(t.images[4][0][1][1].item<float>(), 4.0f / 255.0f);
  EXPECT_EQ(t.labels[3].item<int64_t>(), 3);
}

TEST(DatasetTest, PartitionsAreDisjointAndEqual) {
  TensorSet all = ToTensors(Tiny(11));
  TensorSet p0 = Partition(all, 0, 3), p1 = Partition(all, 1, 3), p2 = Partition(all, 2, 3);
  EXPECT_EQ(p0.size(), 3);
  EXPECT_EQ(p1.size(), 3);
  EXPECT_EQ(p2.size(), 3);
  EXPECT_EQ(p1.labels[0].item<int64_t>(), 1);
  EXPECT_EQ(p1.labels[1].item<int64_t>(), 4);
}

TEST(DatasetTest, EpochOrderIsAPermutationDeterminedBySeedEpochRank) {
  auto a = EpochOrder(1000, 42, 3, 1);
  EXPECT_EQ(a, EpochOrder(1000, 42, 3, 1));
  EXPECT_NE(a, EpochOrder(1000, 42, 4, 1));
  EXPECT_NE(a, EpochOrder(1000, 42, 3, 0));
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
}

// Colour images keep their channels: [N, 3, H, W], channel-major as stored.
TEST(DatasetTest, ColourTensors) {
  data::ImageSet s;
  s.count = 2;
  s.channels = 3;
  s.rows = s.cols = 2;
  for (int i = 0; i < 2 * 3 * 4; ++i) s.pixels.push_back(static_cast<uint8_t>(i));
  s.labels = {1, 0};
  TensorSet t = ToTensors(s);
  EXPECT_EQ(t.images.sizes().vec(), (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_FLOAT_EQ(t.images[1][2][0][1].item<float>(), (12 + 8 + 1) / 255.0f);
}

TEST(DatasetTest, ChannelStatsArePerChannel) {
  torch::Tensor x = torch::zeros({2, 2, 1, 2});
  x.select(1, 0).fill_(0.5);     // constant: std 1 (no spread to divide by)
  x.select(1, 1)[0].fill_(0.0);  // values 0, 0, 1, 1: mean 0.5, std 0.5
  x.select(1, 1)[1].fill_(1.0);
  auto [mean, std] = ChannelStats(x);
  EXPECT_FLOAT_EQ(mean[0].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(std[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(mean[1].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(std[1].item<float>(), 0.5f);
}

// Crop and flip: each output image is a shifted (and maybe mirrored) window of the
// zero-padded input, decided by (seed, epoch, rank, batch) only.
TEST(DatasetTest, AugmentBatchIsACropOrFlipDeterminedBySeedEpochRankBatch) {
  torch::Tensor x = torch::arange(2 * 3 * 8 * 8, torch::kFloat32).reshape({2, 3, 8, 8}).add_(1);
  torch::Tensor a = AugmentBatch(x, 4, 42, 1, 0, 7);
  EXPECT_EQ(a.sizes(), x.sizes());
  EXPECT_TRUE(torch::equal(a, AugmentBatch(x, 4, 42, 1, 0, 7)));
  bool any_differs = false;
  for (int64_t other : {8, 9, 10}) any_differs |= !torch::equal(a, AugmentBatch(x, 4, 42, 1, 0, other));
  any_differs |= !torch::equal(a, AugmentBatch(x, 4, 42, 1, 1, 7));
  EXPECT_TRUE(any_differs);
  // Every output is one of the 9x9 crops of the padded image, or its mirror.
  torch::Tensor padded = torch::constant_pad_nd(x, {4, 4, 4, 4}, 0);
  for (int64_t i = 0; i < 2; ++i) {
    bool found = false;
    for (int64_t dy = 0; dy <= 8 && !found; ++dy) {
      for (int64_t dx = 0; dx <= 8 && !found; ++dx) {
        torch::Tensor crop = padded[i].narrow(1, dy, 8).narrow(2, dx, 8);
        found = torch::equal(a[i], crop) || torch::equal(a[i], crop.flip({2}));
      }
    }
    EXPECT_TRUE(found) << "image " << i;
  }
}

}  // namespace
}  // namespace dtrain::worker
