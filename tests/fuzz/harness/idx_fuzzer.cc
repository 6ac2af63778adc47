// The IDX reader (common/data/idx_reader): the training data a worker loads and the
// `--images`/`--labels` files of `dtrain predict`.
//
// Option byte, (options % 4):
//   0  ReadIdx of a file with a plain name (gzip is still detected by its magic)
//   1  ReadIdx of a file named .gz
//   2  LoadImageSet: the body is a 4-byte little-endian length, the images file of
//      that length, then the labels file
//   3  ReadIdx, then what `dtrain predict --images` does with it: every image (up to
//      4) cut out and fitted to the model's 28 x 28 (predict_job.cc's LoadIdx)
#include <algorithm>
#include <cstdint>
#include <string>

#include "common/data/idx_reader.h"
#include "services/predict/gray_image.h"
#include "tests/fuzz/harness/fuzz_util.h"

namespace dtrain::fuzz {
namespace {

void LoadImageSet(std::string_view body) {
  if (body.size() < 4) return;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= uint32_t{static_cast<uint8_t>(body[i])} << (8 * i);
  body.remove_prefix(4);
  const size_t images = std::min<size_t>(n, body.size());
  WriteScratch("fz-images-idx3-ubyte", body.substr(0, images));
  WriteScratch("fz-labels-idx1-ubyte", body.substr(images));
  absl::StatusOr<data::ImageSet> set = data::LoadImageSet(ScratchDir(), "fz");
  if (!set.ok()) return;
  if (set->pixels.size() != static_cast<size_t>(set->count * set->rows * set->cols) ||
      set->labels.size() != static_cast<size_t>(set->count)) {
    abort();
  }
}

void PredictImages(std::string_view body) {
  absl::StatusOr<data::IdxArray> images = data::ReadIdx(WriteScratch("fz-images", body));
  if (!images.ok() || images->dims.size() != 3 || images->dims[0] < 1) return;
  const int64_t n = images->dims[0], rows = images->dims[1], cols = images->dims[2];
  for (int64_t i = 0; i < std::min<int64_t>(n, 4); ++i) {
    predict::GrayImage img;
    img.width = static_cast<int>(cols);
    img.height = static_cast<int>(rows);
    const auto* first = images->data.data() + i * rows * cols;
    img.pixels.assign(first, first + rows * cols);
    predict::GrayImage fitted = predict::Resize(img, 28, 28);
    if (fitted.pixels.size() != 28 * 28) abort();
  }
}

}  // namespace
}  // namespace dtrain::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain;
  const fuzz::Input in = fuzz::SplitOptions(data, size);
  switch (in.options % 4) {
    case 0: (void)data::ReadIdx(fuzz::WriteScratch("fz-idx", in.body)); break;
    case 1: (void)data::ReadIdx(fuzz::WriteScratch("fz-idx.gz", in.body)); break;
    case 2: fuzz::LoadImageSet(in.body); break;
    default: fuzz::PredictImages(in.body); break;
  }
  return 0;
}
