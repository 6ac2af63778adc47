#include "services/predict/png_io.h"

#include <cairo.h>

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "services/predict/cairo_surface.h"

namespace dtrain::predict {
absl::StatusOr<GrayImage> ReadPngGray(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat("no such image file: ", path));
  }
  Surface png(cairo_image_surface_create_from_png(path.c_str()));
  if (cairo_status_t st = cairo_surface_status(png.get()); st != CAIRO_STATUS_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read as PNG: ", cairo_status_to_string(st)));
  }
  const int width = cairo_image_surface_get_width(png.get());
  const int height = cairo_image_surface_get_height(png.get());
  if (width <= 0 || height <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty image"));
  // Painting onto an ARGB32 surface normalises whatever format cairo chose (A8, RGB24,
  // ARGB32) to one layout.
  Surface argb(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height));
  {
    Context cr(cairo_create(argb.get()));
    cairo_set_source_surface(cr.get(), png.get(), 0, 0);
    cairo_set_operator(cr.get(), CAIRO_OPERATOR_SOURCE);
    cairo_paint(cr.get());
    if (cairo_status_t st = cairo_status(cr.get()); st != CAIRO_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat(path, ": converting pixels: ", cairo_status_to_string(st)));
    }
  }
  cairo_surface_flush(argb.get());
  return GrayFromArgb32(cairo_image_surface_get_data(argb.get()), width, height,
                        cairo_image_surface_get_stride(argb.get()));
}

absl::Status WritePngGray(const GrayImage& image, const std::string& path) {
  Surface rgb = GraySurface(image);
  if (cairo_surface_status(rgb.get()) != CAIRO_STATUS_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat("cannot make a ", image.width, "x", image.height, " image"));
  }
  if (cairo_status_t st = cairo_surface_write_to_png(rgb.get(), path.c_str()); st != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", cairo_status_to_string(st)));
  }
  return absl::OkStatus();
}

}  // namespace dtrain::predict
