#include "services/predict/png_io.h"

#include <cairo.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "services/predict/cairo_surface.h"

namespace dtrain::predict {
namespace {

// 8192 x 8192: far beyond any picture worth shrinking to a model's 28 x 28.
constexpr uint64_t kMaxPixels = uint64_t{64} << 20;

// cairo allocates width x height x 4 bytes as soon as it has read the header, and this
// file needs as much again to convert: a 69-byte PNG claiming 20000 x 20000 pixels
// would cost 3 GB and seconds of painting before failing on its missing data. The
// size is in the first chunk (IHDR: 8-byte signature, length, "IHDR", width, height,
// big-endian), so it is checked here first. Anything that is not a PNG header is left
// to cairo, whose error says so.
absl::Status CheckPngSize(const std::string& path) {
  unsigned char h[24];
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::OkStatus();
  const size_t n = std::fread(h, 1, sizeof(h), f);
  std::fclose(f);
  static const unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (n < sizeof(h) || std::memcmp(h, kSignature, 8) != 0 || std::memcmp(h + 12, "IHDR", 4) != 0) {
    return absl::OkStatus();
  }
  auto be32 = [&](int at) {
    return (uint64_t{h[at]} << 24) | (uint64_t{h[at + 1]} << 16) | (uint64_t{h[at + 2]} << 8) | h[at + 3];
  };
  const uint64_t width = be32(16), height = be32(20);
  if (width * height > kMaxPixels) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", width, " x ", height, " pixels is more than the ", kMaxPixels, " this reads"));
  }
  return absl::OkStatus();
}

// The PNG at `path` painted onto an ARGB32 surface (checked as ReadPngGray says).
absl::StatusOr<Surface> ReadPngArgb(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat("no such image file: ", path));
  }
  if (absl::Status st = CheckPngSize(path); !st.ok()) return st;
  Surface png(cairo_image_surface_create_from_png(path.c_str()));
  if (cairo_status_t st = cairo_surface_status(png.get()); st != CAIRO_STATUS_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read as PNG: ", cairo_status_to_string(st)));
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
  return argb;
}

}  // namespace

absl::StatusOr<GrayImage> ReadPngGray(const std::string& path) {
  absl::StatusOr<Surface> argb = ReadPngArgb(path);
  if (!argb.ok()) return argb.status();
  cairo_surface_t* s = argb->get();
  return GrayFromArgb32(cairo_image_surface_get_data(s), cairo_image_surface_get_width(s),
                        cairo_image_surface_get_height(s), cairo_image_surface_get_stride(s));
}

absl::StatusOr<ModelImage> ReadPngRgb(const std::string& path) {
  absl::StatusOr<Surface> argb = ReadPngArgb(path);
  if (!argb.ok()) return argb.status();
  cairo_surface_t* s = argb->get();
  return RgbFromArgb32(cairo_image_surface_get_data(s), cairo_image_surface_get_width(s),
                       cairo_image_surface_get_height(s), cairo_image_surface_get_stride(s));
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
