#include "services/predict/gray_image.h"

#include <cstring>

#include "gtest/gtest.h"

namespace dtrain::predict {
namespace {

GrayImage Make(int w, int h, std::vector<uint8_t> px) { return {w, h, std::move(px)}; }

GrayImage Constant(int w, int h, uint8_t v) { return Make(w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h, v)); }

TEST(PredictImageTest, GrayIsBt601LumaOfPremultipliedColour) {
  // Pixels as cairo's ARGB32: native-endian 0xAARRGGBB.
  const uint32_t argb[4] = {0xffff0000u,   // red       -> 0.299 * 255 = 76
                            0xff00ff00u,   // green     -> 150
                            0xff0000ffu,   // blue      -> 29
                            0x80808080u};  // white at half alpha, premultiplied -> 128
  uint8_t data[16];
  std::memcpy(data, argb, sizeof(argb));
  GrayImage g = GrayFromArgb32(data, 2, 2, /*stride=*/8);
  EXPECT_EQ(g.width, 2);
  EXPECT_EQ(g.height, 2);
  EXPECT_EQ(g.pixels, (std::vector<uint8_t>{76, 150, 29, 128}));
}

TEST(PredictImageTest, GrayHonoursTheStride) {
  // Two rows of one pixel with 4 padding bytes after each.
  uint8_t data[16] = {};
  const uint32_t white = 0xffffffffu;
  std::memcpy(data + 8, &white, 4);
  GrayImage g = GrayFromArgb32(data, 1, 2, /*stride=*/8);
  EXPECT_EQ(g.pixels, (std::vector<uint8_t>{0, 255}));
}

TEST(PredictImageTest, ShrinkingAveragesEachFootprint) {
  // 4x2 -> 2x1: each output pixel is the mean of a 2x2 block.
  GrayImage in = Make(4, 2, {0, 100, 200, 255, 20, 80, 0, 45});
  GrayImage out = Resize(in, 2, 1);
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{50, 125}));
  // A non-integer ratio keeps a constant image constant (weights sum to one).
  EXPECT_EQ(Resize(Constant(97, 61, 200), 28, 28).pixels, Constant(28, 28, 200).pixels);
}

TEST(PredictImageTest, ShrinkingWeighsPartlyCoveredPixels) {
  // 3 -> 2: output 0 covers source [0, 1.5): all of pixel 0, half of pixel 1.
  GrayImage out = Resize(Make(3, 1, {90, 30, 0}), 2, 1);
  EXPECT_EQ(out.pixels[0], 70);  // (90 * 1 + 30 * 0.5) / 1.5
  EXPECT_EQ(out.pixels[1], 10);  // (30 * 0.5 + 0 * 1) / 1.5
}

TEST(PredictImageTest, GrowingInterpolatesBetweenPixelCentres) {
  GrayImage out = Resize(Make(2, 1, {0, 200}), 4, 1);
  // Centres of 4 outputs map to source x = -0.25, 0.25, 0.75, 1.25 (clamped at the edges).
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{0, 50, 150, 200}));
  EXPECT_EQ(Resize(Make(2, 2, {1, 2, 3, 4}), 2, 2).pixels, (std::vector<uint8_t>{1, 2, 3, 4}));
}

TEST(PredictImageTest, AxesResizeIndependently) {
  GrayImage out = Resize(Constant(8, 2, 90), 2, 6);  // shrink x, grow y
  EXPECT_EQ(out.width, 2);
  EXPECT_EQ(out.height, 6);
  EXPECT_EQ(out.pixels, Constant(2, 6, 90).pixels);
}

TEST(PredictImageTest, LightBackgroundsAreDetectedAndInverted) {
  GrayImage photo = Constant(5, 5, 240);  // a dark shirt on white
  photo.pixels[12] = 10;
  EXPECT_TRUE(HasLightBackground(photo));
  Invert(&photo);
  EXPECT_FALSE(HasLightBackground(photo));
  EXPECT_EQ(photo.pixels[12], 245);
  EXPECT_EQ(photo.pixels[0], 15);
  EXPECT_FALSE(HasLightBackground(Constant(28, 28, 0)));
}

}  // namespace
}  // namespace dtrain::predict
