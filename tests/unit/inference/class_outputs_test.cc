#include "services/inference/class_outputs.h"

#include "gtest/gtest.h"

namespace dtrain::inference {
namespace {

ClassOutputs TwoImages() {
  ClassOutputs o;
  o.images = 2;
  o.num_classes = 3;
  o.logits = {1, 2, 3, 4, 5, 6};
  o.probabilities = {0.2f, 0.5f, 0.3f, 0.4f, 0.2f, 0.4f};
  return o;
}

TEST(ClassOutputsTest, RowsCutsOneCallersImages) {
  ClassOutputs second = TwoImages().Rows(1, 1);
  EXPECT_EQ(second.images, 1);
  EXPECT_EQ(second.num_classes, 3);
  EXPECT_EQ(second.logits, (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(second.probabilities, (std::vector<float>{0.4f, 0.2f, 0.4f}));
}

TEST(ClassOutputsTest, TopClassesMostProbableFirstTiesByLowerClass) {
  Predictions p = TopClasses(TwoImages(), 2);
  ASSERT_EQ(p.size(), 2u);
  ASSERT_EQ(p[0].size(), 2u);
  EXPECT_EQ(p[0][0].class_id, 1);
  EXPECT_FLOAT_EQ(p[0][0].probability, 0.5f);
  EXPECT_EQ(p[0][1].class_id, 2);
  EXPECT_EQ(p[1][0].class_id, 0);  // 0.4 twice: the lower class first
  EXPECT_EQ(p[1][1].class_id, 2);
  // top_k clamped to [1, classes].
  EXPECT_EQ(TopClasses(TwoImages(), 0)[0].size(), 1u);
  EXPECT_EQ(TopClasses(TwoImages(), 99)[0].size(), 3u);
}

}  // namespace
}  // namespace dtrain::inference
