// What a shard store refuses of a new key, and what a key costs it.
#include "common/kv/key_checks.h"

#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::kv {
namespace {

using ::testing::HasSubstr;

TEST(KeyChecksTest, RefusesShapesThatDoNotHoldTheValues) {
  const float v[6] = {};
  EXPECT_TRUE(CheckNewKey(3, {2, 3}, v, 6, 0).ok());
  EXPECT_EQ(CheckNewKey(3, {2, 3}, v, 5, 0), absl::InvalidArgumentError("key 3: shape [2,3] does not hold 5 elements"));
  EXPECT_EQ(CheckNewKey(3, {-1, -6}, v, 6, 0).code(), absl::StatusCode::kInvalidArgument);
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_EQ(CheckNewKey(3, {big, 4}, v, 0, 0).code(), absl::StatusCode::kInvalidArgument);  // overflows
  EXPECT_THAT(std::string(CheckNewKey(3, std::vector<int64_t>(33, 1), v, 1, 0).message()),
              HasSubstr("33 dimensions, more than 32"));
  EXPECT_EQ(CheckNewKey(3, {2}, nullptr, 2, 0), absl::InvalidArgumentError("key 3: no values"));
  EXPECT_TRUE(CheckNewKey(3, {0}, nullptr, 0, 0).ok());
  EXPECT_EQ(CheckNewKey(3, {2}, v, 2, -1), absl::InvalidArgumentError("key 3: negative version -1"));
}

TEST(KeyChecksTest, KeyBytesCountsWhatTheKeyKeeps) {
  EXPECT_EQ(KeyBytes(10, 20, false, nullptr), (10 + 20) * 4);
  EXPECT_EQ(KeyBytes(10, 20, true, nullptr), (2 * 10 + 20) * 4);
  const auto fp16 = MakeCodec({CompressionType::kFp16, 1.0f});
  // The packed change, plus a spare buffer where no previous version is kept.
  EXPECT_EQ(KeyBytes(10, 20, false, fp16.get()), (10 + 10 + 20) * 4 + fp16->PackedBytes(10));
  EXPECT_EQ(KeyBytes(10, 20, true, fp16.get()), (2 * 10 + 20) * 4 + fp16->PackedBytes(10));
}

}  // namespace
}  // namespace dtrain::kv
