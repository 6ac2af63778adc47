// Images with any number of channels, as a model takes them ([C, H, W], channel-major),
// and the conversion of any picture to a model's input shape: channels (gray to colour
// by repeating the plane, colour to gray by luma) and size (each plane resized as
// gray_image.h resizes). A GrayImage is the one-channel case.
#pragma once

#include <cstdint>
#include <vector>

#include "services/predict/gray_image.h"

namespace dtrain::predict {

struct ModelImage {
  ModelImage() = default;
  // A gray image is a one-channel image (implicit: every gray picture is one).
  ModelImage(const GrayImage& gray);  // NOLINT(google-explicit-constructor)

  int channels = 0;
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // channels planes of height rows of width, 0 = dark

  // Plane c as a gray image.
  GrayImage Plane(int c) const;
};

// From 32-bit cairo pixels (native-endian 0xAARRGGBB, premultiplied: the picture over
// black, as GrayFromArgb32 takes them): three planes, red, green, blue.
ModelImage RgbFromArgb32(const uint8_t* data, int width, int height, int stride);

// `image` with `channels` channels of `height` x `width`: one channel becomes any number
// by repetition, three become one by ITU-R BT.601 luma (as GrayFromArgb32), equal counts
// stay; each plane is then resized (Resize). Other channel changes keep the first
// `channels` planes, repeating the last.
ModelImage FitToInput(const ModelImage& image, int channels, int height, int width);

}  // namespace dtrain::predict
