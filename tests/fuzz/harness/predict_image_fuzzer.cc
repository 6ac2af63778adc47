// The picture path of `dtrain predict` (services/predict): a PNG file read through
// cairo into a GrayImage, the background test and inversion, and the fit to the
// model's input size, in the order LoadPngs in predict_job.cc does them.
//
// Option byte: bit 0 rewrites every complete PNG chunk's CRC, so mutations reach the
// decoder behind libpng's checksum; bit 1 picks a target size from bits 2-7 instead of
// 28 x 28 (the size comes from the server's ModelInfo, which is outside input too).
#include <zlib.h>

#include <cstdint>
#include <string>

#include "services/predict/gray_image.h"
#include "services/predict/png_io.h"
#include "tests/fuzz/harness/fuzz_util.h"

namespace dtrain::fuzz {
namespace {

uint32_t BigEndian32(const std::string& b, size_t pos) {
  return (uint32_t{static_cast<uint8_t>(b[pos])} << 24) | (uint32_t{static_cast<uint8_t>(b[pos + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(b[pos + 2])} << 8) | uint32_t{static_cast<uint8_t>(b[pos + 3])};
}

// PNG: 8-byte signature, then chunks of u32 length, 4-byte type, data, u32 CRC of
// type and data (all big-endian).
std::string FixChunkCrcs(std::string png) {
  size_t pos = 8;
  while (pos + 12 <= png.size()) {
    const uint32_t len = BigEndian32(png, pos);
    if (len > png.size() - pos - 12) break;
    const auto* type_and_data = reinterpret_cast<const Bytef*>(png.data() + pos + 4);
    const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), type_and_data, len + 4));
    for (int i = 0; i < 4; ++i) png[pos + 8 + len + i] = static_cast<char>(crc >> (24 - 8 * i));
    pos += 12 + size_t{len};
  }
  return png;
}

}  // namespace
}  // namespace dtrain::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain;
  const fuzz::Input in = fuzz::SplitOptions(data, size);
  std::string png(in.body);
  if (in.options & 1) png = fuzz::FixChunkCrcs(std::move(png));
  int width = 28, height = 28;
  if (in.options & 2) {
    width = 1 + ((in.options >> 2) & 7) * 9;
    height = 1 + ((in.options >> 5) & 7) * 9;
  }
  absl::StatusOr<predict::GrayImage> img = predict::ReadPngGray(fuzz::WriteScratch("fz.png", png));
  if (!img.ok()) return 0;
  if (img->pixels.size() != static_cast<size_t>(img->width) * img->height) abort();
  if (predict::HasLightBackground(*img)) predict::Invert(&*img);
  predict::GrayImage fitted = predict::Resize(*img, width, height);
  if (fitted.pixels.size() != static_cast<size_t>(width) * height) abort();
  return 0;
}
