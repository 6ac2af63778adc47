#include "services/predict/cairo_surface.h"

#include <cstddef>
#include <cstdint>

namespace dtrain::predict {

Surface GraySurface(const GrayImage& image) {
  Surface s(cairo_image_surface_create(CAIRO_FORMAT_RGB24, image.width, image.height));
  if (cairo_surface_status(s.get()) != CAIRO_STATUS_SUCCESS) return s;
  cairo_surface_flush(s.get());
  uint8_t* data = cairo_image_surface_get_data(s.get());
  const int stride = cairo_image_surface_get_stride(s.get());
  for (int y = 0; y < image.height; ++y) {
    auto* row = reinterpret_cast<uint32_t*>(data + static_cast<size_t>(y) * stride);
    for (int x = 0; x < image.width; ++x) {
      const uint32_t v = image.at(x, y);
      row[x] = 0xff000000u | v << 16 | v << 8 | v;
    }
  }
  cairo_surface_mark_dirty(s.get());
  return s;
}

Surface ImageSurface(const ModelImage& image) {
  if (image.channels != 3) return GraySurface(image.Plane(0));
  Surface s(cairo_image_surface_create(CAIRO_FORMAT_RGB24, image.width, image.height));
  if (cairo_surface_status(s.get()) != CAIRO_STATUS_SUCCESS) return s;
  cairo_surface_flush(s.get());
  uint8_t* data = cairo_image_surface_get_data(s.get());
  const int stride = cairo_image_surface_get_stride(s.get());
  const size_t plane = static_cast<size_t>(image.width) * image.height;
  for (int y = 0; y < image.height; ++y) {
    auto* row = reinterpret_cast<uint32_t*>(data + static_cast<size_t>(y) * stride);
    for (int x = 0; x < image.width; ++x) {
      const size_t at = static_cast<size_t>(y) * image.width + x;
      row[x] = 0xff000000u | uint32_t{image.pixels[at]} << 16 | uint32_t{image.pixels[plane + at]} << 8 |
               image.pixels[2 * plane + at];
    }
  }
  cairo_surface_mark_dirty(s.get());
  return s;
}

}  // namespace dtrain::predict
