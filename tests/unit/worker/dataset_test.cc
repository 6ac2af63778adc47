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

}  // namespace
}  // namespace dtrain::worker
