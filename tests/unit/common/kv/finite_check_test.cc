// AllFinite must see a NaN or Inf wherever it lies: in the vectorised blocks or in
// the tail, in every lane.
#include "common/kv/finite_check.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

TEST(FiniteCheckTest, FindsEveryKindOfNonFiniteAtEveryPosition) {
  const float bads[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::signaling_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  for (int64_t n : {1, 7, 8, 9, 16, 37}) {
    std::vector<float> x(static_cast<size_t>(n), 1.5f);
    ASSERT_TRUE(AllFinite(x.data(), n));
    EXPECT_EQ(FirstNonFinite(x.data(), n), -1);
    for (int64_t i = 0; i < n; ++i) {
      for (float bad : bads) {
        x[static_cast<size_t>(i)] = bad;
        EXPECT_FALSE(AllFinite(x.data(), n)) << "n " << n << " i " << i << " value " << bad;
        EXPECT_EQ(FirstNonFinite(x.data(), n), i);
        x[static_cast<size_t>(i)] = 1.5f;
      }
    }
  }
}

TEST(FiniteCheckTest, ExtremeFiniteValuesAreFinite) {
  const std::vector<float> x = {std::numeric_limits<float>::max(),
                                -std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::denorm_min(),
                                -0.0f,
                                0.0f,
                                std::numeric_limits<float>::min(),
                                1e-30f,
                                -1e30f,
                                3.0f};
  EXPECT_TRUE(AllFinite(x.data(), static_cast<int64_t>(x.size())));
  EXPECT_TRUE(AllFinite(nullptr, 0));
}

}  // namespace
}  // namespace dtrain::kv
