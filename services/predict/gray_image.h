// Grayscale images and the two conversions `dtrain predict` needs to turn any picture
// into the model's input: colour to gray, and resizing to the input's height x width.
// Plain loops over bytes; no image library, so they are exact and unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain::predict {

struct GrayImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // row-major, width * height, 0 = black

  uint8_t at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

// From 32-bit pixels as cairo stores them (native-endian 0xAARRGGBB, colour
// premultiplied by alpha), `stride` bytes per row. Luma is ITU-R BT.601
// (0.299 R + 0.587 G + 0.114 B). Premultiplied colour is the picture composited over
// black, which is what a transparent background should become: Fashion-MNIST draws
// light things on black.
GrayImage GrayFromArgb32(const uint8_t* data, int width, int height, int stride);

// Resizes to `width` x `height`. Shrinking averages each output pixel's footprint in the
// source, weighting partly covered source pixels by their coverage (area filter: no
// aliasing when a photo shrinks to 28x28); growing interpolates bilinearly between pixel
// centres. Each axis is handled on its own, so one may shrink while the other grows.
GrayImage Resize(const GrayImage& in, int width, int height);

// Fashion-MNIST images are light objects on a dark background; photographs of products
// are usually the opposite. True when the border (the outermost pixels) is on average
// lighter than mid-gray, i.e. the picture should be inverted to look like the data.
bool HasLightBackground(const GrayImage& image);

// 255 - v for every pixel.
void Invert(GrayImage* image);

}  // namespace dtrain::predict
