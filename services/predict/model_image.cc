#include "services/predict/model_image.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dtrain::predict {

ModelImage::ModelImage(const GrayImage& gray)
    : channels(1), width(gray.width), height(gray.height), pixels(gray.pixels) {}

GrayImage ModelImage::Plane(int c) const {
  GrayImage g;
  g.width = width;
  g.height = height;
  const size_t plane = static_cast<size_t>(width) * height;
  g.pixels.assign(pixels.begin() + static_cast<std::ptrdiff_t>(c * plane),
                  pixels.begin() + static_cast<std::ptrdiff_t>((c + 1) * plane));
  return g;
}

ModelImage RgbFromArgb32(const uint8_t* data, int width, int height, int stride) {
  ModelImage out;
  out.channels = 3;
  out.width = width;
  out.height = height;
  const size_t plane = static_cast<size_t>(width) * height;
  out.pixels.resize(3 * plane);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint32_t p;
      std::memcpy(&p, data + static_cast<size_t>(y) * stride + 4 * static_cast<size_t>(x), 4);
      const size_t at = static_cast<size_t>(y) * width + x;
      out.pixels[at] = static_cast<uint8_t>(p >> 16);
      out.pixels[plane + at] = static_cast<uint8_t>(p >> 8);
      out.pixels[2 * plane + at] = static_cast<uint8_t>(p);
    }
  }
  return out;
}

ModelImage FitToInput(const ModelImage& image, int channels, int height, int width) {
  std::vector<GrayImage> planes;
  if (image.channels == 3 && channels == 1) {
    GrayImage gray = image.Plane(0);
    const GrayImage g = image.Plane(1), b = image.Plane(2);
    for (size_t i = 0; i < gray.pixels.size(); ++i) {
      const double luma = 0.299 * gray.pixels[i] + 0.587 * g.pixels[i] + 0.114 * b.pixels[i];
      gray.pixels[i] = static_cast<uint8_t>(std::min<long>(255, std::lround(luma)));
    }
    planes.push_back(std::move(gray));
  } else {
    for (int c = 0; c < channels; ++c) planes.push_back(image.Plane(std::min(c, image.channels - 1)));
  }
  ModelImage out;
  out.channels = channels;
  out.width = width;
  out.height = height;
  for (GrayImage& p : planes) {
    if (p.width != width || p.height != height) p = Resize(p, width, height);
    out.pixels.insert(out.pixels.end(), p.pixels.begin(), p.pixels.end());
  }
  return out;
}

}  // namespace dtrain::predict
