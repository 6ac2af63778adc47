// Checks a Predict request's images against the loaded model before any tensor is made.
//
// No LibTorch and no gRPC here: the checks are plain arithmetic over the request's shape
// and bytes, so they are unit-tested in milliseconds and every refusal has one clear
// message naming what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace dtrain::inference {

enum class PixelType { kUnspecified, kUint8, kFloat32 };

// Bytes per pixel; 0 for kUnspecified.
int PixelBytes(PixelType type);

// A validated batch: a view of the caller's bytes (which must outlive it), laid out as
// `count` images of the model's input shape.
struct ImageBatchView {
  PixelType type = PixelType::kUnspecified;
  int64_t count = 0;
  std::vector<int64_t> image_shape;  // the model's, e.g. {1, 28, 28}
  std::string_view data;             // count * product(image_shape) * PixelBytes(type)
};

// Accepts `shape` = [N, *input_shape], or [N, H, W] when input_shape is [1, H, W].
// INVALID_ARGUMENT, in this order, for: an unspecified pixel type; a shape of the wrong
// rank or dimensions (naming the expected one, e.g. "[N,1,28,28]"); an empty batch;
// N over `max_batch`; data whose length is not N images; a NaN or infinite float pixel
// (naming the image and pixel).
absl::StatusOr<ImageBatchView> ValidateImages(PixelType type, const std::vector<int64_t>& shape, std::string_view data,
                                              const std::vector<int64_t>& input_shape, int64_t max_batch);

// "[N,1,28,28]" for input shape {1, 28, 28}.
std::string ExpectedShapeText(const std::vector<int64_t>& input_shape);

}  // namespace dtrain::inference
