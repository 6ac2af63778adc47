#include "services/predict/model_image.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::predict {
namespace {

using ::testing::ElementsAre;

GrayImage Gray(int w, int h, std::vector<uint8_t> pixels) {
  GrayImage g;
  g.width = w;
  g.height = h;
  g.pixels = std::move(pixels);
  return g;
}

// cairo's native-endian 0xAARRGGBB words become three planes, red first.
TEST(ModelImageTest, RgbFromArgb32SplitsThePlanes) {
  const std::vector<uint32_t> argb = {0xff102030u, 0xff405060u};
  ModelImage img = RgbFromArgb32(reinterpret_cast<const uint8_t*>(argb.data()), 2, 1, 8);
  EXPECT_EQ(img.channels, 3);
  EXPECT_THAT(img.pixels, ElementsAre(0x10, 0x40, 0x20, 0x50, 0x30, 0x60));
}

TEST(ModelImageTest, FitToInputConvertsChannelsAndSize) {
  // Gray to 3 channels: the plane repeated.
  ModelImage three = FitToInput(Gray(2, 1, {7, 9}), 3, 1, 2);
  EXPECT_EQ(three.channels, 3);
  EXPECT_THAT(three.pixels, ElementsAre(7, 9, 7, 9, 7, 9));
  // Colour to gray: BT.601 luma, rounded.
  ModelImage rgb;
  rgb.channels = 3;
  rgb.width = 1;
  rgb.height = 1;
  rgb.pixels = {200, 100, 50};
  ModelImage gray = FitToInput(rgb, 1, 1, 1);
  EXPECT_EQ(gray.channels, 1);
  EXPECT_THAT(gray.pixels, ElementsAre(124));  // 0.299*200 + 0.587*100 + 0.114*50 = 124.2
  // Each plane resized on its own: a constant plane stays constant.
  rgb.pixels = {10, 20, 30};
  ModelImage big = FitToInput(rgb, 3, 4, 4);
  EXPECT_EQ(big.pixels.size(), 3u * 16);
  EXPECT_EQ(big.pixels[0], 10);
  EXPECT_EQ(big.pixels[16 + 5], 20);
  EXPECT_EQ(big.pixels[32 + 15], 30);
  EXPECT_EQ(big.Plane(2).pixels, std::vector<uint8_t>(16, 30));
}

}  // namespace
}  // namespace dtrain::predict
