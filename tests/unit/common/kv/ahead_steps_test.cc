// AheadSteps (SSP): pushes for later steps held until their step's turn, then handed
// over in rank order, one step at a time.
#include "common/kv/ahead_steps.h"

#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(AheadStepsTest, HandsOverTheEarliestStepOnlyWhenItIsItsTurn) {
  AheadSteps ahead;
  const float g2[] = {2, 2};
  const float g0[] = {0, 0};
  const float g1[] = {1, 1};
  ahead.Hold(6, 2, g2, 2);
  ahead.Hold(6, 0, g0, 2);
  ahead.Hold(7, 1, g1, 2);
  EXPECT_TRUE(ahead.Holds(6, 0));
  EXPECT_FALSE(ahead.Holds(6, 1));
  EXPECT_FALSE(ahead.Holds(8, 0));
  std::vector<std::pair<int, float>> taken;
  auto take = [&taken](int w, std::vector<float>& grad) { taken.emplace_back(w, grad[0]); };
  EXPECT_FALSE(ahead.TakeStep(5, take));  // step 6 is not step 5's turn
  EXPECT_FALSE(ahead.TakeStep(7, take));  // nor is 7 while 6 is held
  EXPECT_TRUE(ahead.TakeStep(6, take));
  EXPECT_THAT(taken, ElementsAre(Pair(0, 0.0f), Pair(2, 2.0f)));  // rank order
  EXPECT_FALSE(ahead.Holds(6, 0));
  taken.clear();
  EXPECT_TRUE(ahead.TakeStep(7, take));
  EXPECT_THAT(taken, ElementsAre(Pair(1, 1.0f)));
  EXPECT_TRUE(ahead.empty());
}

TEST(AheadStepsTest, TakeMaySwapTheBufferOut) {
  AheadSteps ahead;
  const float g[] = {3, 4};
  ahead.Hold(1, 0, g, 2);
  std::vector<float> mine;
  ASSERT_TRUE(ahead.TakeStep(1, [&mine](int, std::vector<float>& grad) { mine.swap(grad); }));
  EXPECT_THAT(mine, ElementsAre(3.0f, 4.0f));
}

TEST(AheadStepsTest, ClearForgetsEverything) {
  AheadSteps ahead;
  const float g[] = {1};
  ahead.Hold(3, 0, g, 1);
  ahead.clear();
  EXPECT_TRUE(ahead.empty());
  EXPECT_FALSE(ahead.Holds(3, 0));
}

}  // namespace
}  // namespace dtrain::kv
