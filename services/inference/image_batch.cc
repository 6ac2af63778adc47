#include "services/inference/image_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtrain::inference {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

// The index of the first non-finite float in `data`, or -1. memcpy because protobuf's
// bytes carry no alignment promise for floats.
int64_t FirstNonFinite(std::string_view data) {
  const int64_t n = static_cast<int64_t>(data.size() / sizeof(float));
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, data.data() + i * sizeof(float), sizeof(float));
    if (!std::isfinite(v)) return i;
  }
  return -1;
}

}  // namespace

int PixelBytes(PixelType type) {
  switch (type) {
    case PixelType::kUint8: return 1;
    case PixelType::kFloat32: return 4;
    case PixelType::kUnspecified: break;
  }
  return 0;
}

std::string ExpectedShapeText(const std::vector<int64_t>& input_shape) {
  std::string text = absl::StrCat("[N,", absl::StrJoin(input_shape, ","), "]");
  if (input_shape.size() == 3 && input_shape[0] == 1) {
    absl::StrAppend(&text, " (or [N,", input_shape[1], ",", input_shape[2], "])");
  }
  return text;
}

absl::StatusOr<ImageBatchView> ValidateImages(PixelType type, const std::vector<int64_t>& shape, std::string_view data,
                                              const std::vector<int64_t>& input_shape, int64_t max_batch) {
  const int pixel_bytes = PixelBytes(type);
  if (pixel_bytes == 0) {
    return absl::InvalidArgumentError(
        "pixel type is unspecified: send uint8 (0..255) or float32 (scaled to [0,1]) pixels");
  }
  const std::string expected = ExpectedShapeText(input_shape);
  // [N, H, W] stands for [N, 1, H, W]: single-channel images are usually sent that way.
  const bool channel_dropped = input_shape.size() == 3 && input_shape[0] == 1 && shape.size() == input_shape.size();
  std::vector<int64_t> want = input_shape;
  if (channel_dropped) want.erase(want.begin());
  const bool dims_match = shape.size() == want.size() + 1 && std::equal(want.begin(), want.end(), shape.begin() + 1);
  if (!dims_match) {
    return absl::InvalidArgumentError(
        absl::StrCat("images have shape ", ShapeText(shape), ", the model expects ", expected));
  }
  const int64_t count = shape[0];
  if (count <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(count == 0 ? "empty batch: " : "negative batch size: ", "shape ",
                                                   ShapeText(shape), " holds no images; send at least one of ",
                                                   expected));
  }
  if (count > max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", count, " images is over the limit of ", max_batch, " (--max-batch); split it"));
  }
  // count <= max_batch and the model's shape is small, so this cannot overflow.
  int64_t per_image = pixel_bytes;
  for (int64_t d : input_shape) per_image *= d;
  const int64_t want_bytes = count * per_image;
  if (static_cast<int64_t>(data.size()) != want_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("image data has ", data.size(), " bytes, expected ", want_bytes,
                                                   " for ", count, " ", type == PixelType::kUint8 ? "uint8" : "float32",
                                                   " image(s) of ", ShapeText(input_shape)));
  }
  if (type == PixelType::kFloat32) {
    const int64_t bad = FirstNonFinite(data);
    if (bad >= 0) {
      float v;
      std::memcpy(&v, data.data() + bad * sizeof(float), sizeof(float));
      const int64_t per_image_pixels = per_image / pixel_bytes;
      return absl::InvalidArgumentError(
          absl::StrCat("image ", bad / per_image_pixels, " pixel ", bad % per_image_pixels, " is ",
                       std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf"), ": pixels must be finite"));
    }
  }
  ImageBatchView view;
  view.type = type;
  view.count = count;
  view.image_shape = input_shape;
  view.data = data;
  return view;
}

}  // namespace dtrain::inference
