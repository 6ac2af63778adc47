#include "services/inference/image_batch.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::inference {
namespace {

using ::testing::HasSubstr;

const std::vector<int64_t> kLenet = {1, 28, 28};

std::string Bytes(int64_t images, int pixel_bytes = 1) {
  return std::string(static_cast<size_t>(images * 784 * pixel_bytes), '\0');
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(InferenceInputTest, AcceptsBothSpellingsOfASingleChannelBatch) {
  const std::string data = Bytes(3);
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{3, 1, 28, 28}, std::vector<int64_t>{3, 28, 28}}) {
    auto v = ValidateImages(PixelType::kUint8, shape, data, kLenet, 8);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->count, 3);
    EXPECT_EQ(v->image_shape, kLenet);
    EXPECT_EQ(v->data.size(), 3u * 784);
  }
}

TEST(InferenceInputTest, WrongShapeNamesTheExpectedOne) {
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 32, 32}, std::vector<int64_t>{1, 3, 28, 28}, std::vector<int64_t>{784},
        std::vector<int64_t>{}, std::vector<int64_t>{1, 1, 1, 28, 28}}) {
    auto v = ValidateImages(PixelType::kUint8, shape, Bytes(1), kLenet, 8);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("the model expects [N,1,28,28] (or [N,28,28])"));
  }
  // A multi-channel model has no short spelling.
  auto v = ValidateImages(PixelType::kUint8, {1, 3, 32, 32}, std::string(3 * 32 * 32, '\0'), {3, 32, 32}, 8);
  ASSERT_TRUE(v.ok()) << v.status();
  v = ValidateImages(PixelType::kUint8, {1, 32, 32}, std::string(32 * 32, '\0'), {3, 32, 32}, 8);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("images have shape [1,32,32], the model expects [N,3,32,32]"));
}

TEST(InferenceInputTest, RefusesUnspecifiedPixelType) {
  auto v = ValidateImages(PixelType::kUnspecified, {1, 28, 28}, Bytes(1), kLenet, 8);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("pixel type is unspecified"));
}

TEST(InferenceInputTest, RefusesEmptyNegativeAndOversizedBatches) {
  auto empty = ValidateImages(PixelType::kUint8, {0, 28, 28}, "", kLenet, 8);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("empty batch"));
  auto negative = ValidateImages(PixelType::kUint8, {-2, 28, 28}, "", kLenet, 8);
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("negative batch size"));
  auto big = ValidateImages(PixelType::kUint8, {9, 28, 28}, Bytes(9), kLenet, 8);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("batch of 9 images is over the limit of 8"));
  // A huge claimed count is refused before any size arithmetic.
  auto huge = ValidateImages(PixelType::kFloat32, {int64_t{1} << 62, 28, 28}, Bytes(1), kLenet, 8);
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("over the limit of 8"));
}

TEST(InferenceInputTest, DataLengthMustMatchTheShapeAndPixelType) {
  auto v = ValidateImages(PixelType::kUint8, {2, 28, 28}, Bytes(1), kLenet, 8);
  EXPECT_THAT(std::string(v.status().message()),
              HasSubstr("image data has 784 bytes, expected 1568 for 2 uint8 image(s) of [1,28,28]"));
  v = ValidateImages(PixelType::kFloat32, {1, 28, 28}, Bytes(1), kLenet, 8);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("expected 3136 for 1 float32 image(s)"));
  EXPECT_TRUE(ValidateImages(PixelType::kFloat32, {1, 28, 28}, Bytes(1, 4), kLenet, 8).ok());
}

TEST(InferenceInputTest, NonFiniteFloatsAreNamedByImageAndPixel) {
  struct Case {
    float value;
    const char* name;
  };
  for (const Case& c :
       {Case{std::numeric_limits<float>::quiet_NaN(), "NaN"}, Case{std::numeric_limits<float>::infinity(), "+Inf"},
        Case{-std::numeric_limits<float>::infinity(), "-Inf"}}) {
    std::vector<float> pixels(2 * 784, 0.25f);
    pixels[784 + 17] = c.value;
    auto v = ValidateImages(PixelType::kFloat32, {2, 1, 28, 28}, Floats(pixels), kLenet, 8);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(std::string("image 1 pixel 17 is ") + c.name));
  }
  // Out-of-range but finite values are the caller's business.
  std::vector<float> pixels(784, 3.5f);
  EXPECT_TRUE(ValidateImages(PixelType::kFloat32, {1, 28, 28}, Floats(pixels), kLenet, 8).ok());
}

TEST(InferenceInputTest, FloatsNeedNoAlignment) {
  std::vector<float> pixels(784, 0.5f);
  pixels[3] = std::numeric_limits<float>::quiet_NaN();
  std::string shifted = "x" + Floats(pixels);
  auto v = ValidateImages(PixelType::kFloat32, {1, 28, 28}, std::string_view(shifted).substr(1), kLenet, 8);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("image 0 pixel 3 is NaN"));
}

}  // namespace
}  // namespace dtrain::inference
