// PreviousWeights: a key's weights of the version before the current one, swapped in
// by each merged step and forgotten by a rollback; the texts an exact pull's refusal
// quotes.
#include "common/kv/previous_weights.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::ElementsAre;

TEST(PreviousWeightsTest, AdvanceSwapsTheNewWeightsInAndKeepsTheOldOnes) {
  PreviousWeights previous(/*keep=*/true, 3);
  ASSERT_TRUE(previous.kept());
  EXPECT_EQ(previous.version(), -1);
  EXPECT_EQ(previous.At(0), nullptr);  // nothing merged yet
  std::vector<float> current = {1, 2, 3};
  float* spare = previous.spare();
  spare[0] = 4, spare[1] = 5, spare[2] = 6;
  previous.Advance(&current, /*version=*/7);
  EXPECT_THAT(current, ElementsAre(4, 5, 6));
  EXPECT_EQ(previous.version(), 7);
  ASSERT_NE(previous.At(7), nullptr);
  EXPECT_THAT(std::vector<float>(previous.At(7), previous.At(7) + 3), ElementsAre(1, 2, 3));
  EXPECT_EQ(previous.At(6), nullptr);
  EXPECT_EQ(previous.At(8), nullptr);
  // The next step writes into the buffer that held version 7's weights: no allocation.
  EXPECT_EQ(previous.spare(), previous.At(7));
}

TEST(PreviousWeightsTest, ForgetHoldsNothingUntilTheNextStep) {
  PreviousWeights previous(/*keep=*/true, 1);
  std::vector<float> current = {1};
  previous.Advance(&current, 0);
  previous.Forget();
  EXPECT_EQ(previous.version(), -1);
  EXPECT_EQ(previous.At(0), nullptr);
  EXPECT_EQ(previous.HeldText(5), "the key holds version 5 only (no step has merged on this server yet)");
}

TEST(PreviousWeightsTest, HeldTextSaysWhatAnExactPullCanGet) {
  PreviousWeights kept(/*keep=*/true, 1);
  std::vector<float> current = {1};
  kept.Advance(&current, 6);
  EXPECT_EQ(kept.HeldText(7), "the key holds version 7 and its previous, 6");
  const PreviousWeights none(/*keep=*/false, 1);
  EXPECT_FALSE(none.kept());
  EXPECT_EQ(none.At(-1), nullptr);
  EXPECT_EQ(none.HeldText(7), "the key holds version 7 only (this store keeps no previous version)");
}

}  // namespace
}  // namespace dtrain::kv
