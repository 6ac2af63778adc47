#include "services/predict/gray_image.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dtrain::predict {
namespace {

// Per output index along one axis: the source indices it reads and their weights.
struct Tap {
  int index;
  double weight;
};

// Area filter for shrinking: output pixel o covers source [o*s, (o+1)*s) with s = in/out.
std::vector<std::vector<Tap>> AreaTaps(int in, int out) {
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / out;
  for (int o = 0; o < out; ++o) {
    const double begin = o * scale, end = (o + 1) * scale;
    for (int i = static_cast<int>(std::floor(begin)); i < in && i < end; ++i) {
      const double cover = std::min<double>(i + 1, end) - std::max<double>(i, begin);
      if (cover > 1e-12) taps[static_cast<size_t>(o)].push_back({i, cover / scale});
    }
  }
  return taps;
}

// Bilinear for growing (and the identity for equal sizes): pixel centres aligned, edges
// clamped.
std::vector<std::vector<Tap>> LinearTaps(int in, int out) {
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / out;
  for (int o = 0; o < out; ++o) {
    const double src = std::clamp((o + 0.5) * scale - 0.5, 0.0, static_cast<double>(in - 1));
    const int lo = static_cast<int>(std::floor(src));
    const int hi = std::min(lo + 1, in - 1);
    const double frac = src - lo;
    auto& t = taps[static_cast<size_t>(o)];
    t.push_back({lo, 1.0 - frac});
    if (hi != lo && frac > 0) t.push_back({hi, frac});
  }
  return taps;
}

std::vector<std::vector<Tap>> TapsFor(int in, int out) { return out < in ? AreaTaps(in, out) : LinearTaps(in, out); }

}  // namespace

GrayImage GrayFromArgb32(const uint8_t* data, int width, int height, int stride) {
  GrayImage out;
  out.width = width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(width) * height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint32_t argb;
      std::memcpy(&argb, data + static_cast<size_t>(y) * stride + 4 * static_cast<size_t>(x), 4);
      const double r = (argb >> 16) & 0xff, g = (argb >> 8) & 0xff, b = argb & 0xff;
      const double luma = 0.299 * r + 0.587 * g + 0.114 * b;
      out.pixels[static_cast<size_t>(y) * width + x] = static_cast<uint8_t>(std::clamp(std::lround(luma), 0L, 255L));
    }
  }
  return out;
}

GrayImage Resize(const GrayImage& in, int width, int height) {
  GrayImage out;
  out.width = width;
  out.height = height;
  out.pixels.assign(static_cast<size_t>(width) * height, 0);
  if (in.width <= 0 || in.height <= 0 || width <= 0 || height <= 0) return out;
  const auto xt = TapsFor(in.width, width);
  const auto yt = TapsFor(in.height, height);
  // Rows first into doubles, then columns, so each source pixel is read once per row tap.
  std::vector<double> rows(static_cast<size_t>(in.height) * width);
  for (int y = 0; y < in.height; ++y) {
    for (int x = 0; x < width; ++x) {
      double v = 0;
      for (const Tap& t : xt[static_cast<size_t>(x)]) v += t.weight * in.at(t.index, y);
      rows[static_cast<size_t>(y) * width + x] = v;
    }
  }
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      double v = 0;
      for (const Tap& t : yt[static_cast<size_t>(y)]) v += t.weight * rows[static_cast<size_t>(t.index) * width + x];
      out.pixels[static_cast<size_t>(y) * width + x] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
    }
  }
  return out;
}

bool HasLightBackground(const GrayImage& image) {
  if (image.width <= 0 || image.height <= 0) return false;
  double sum = 0;
  int64_t n = 0;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      if (y != 0 && y != image.height - 1 && x != 0 && x != image.width - 1) continue;
      sum += image.at(x, y);
      ++n;
    }
  }
  return sum / static_cast<double>(n) > 127.5;
}

void Invert(GrayImage* image) {
  for (uint8_t& v : image->pixels) v = static_cast<uint8_t>(255 - v);
}

}  // namespace dtrain::predict
