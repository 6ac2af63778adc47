// PNG in, through cairo (Debian's libcairo2): any PNG cairo reads (gray, RGB, palette,
// with or without alpha) becomes a GrayImage, or for colour models a 3-channel ModelImage.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "services/predict/gray_image.h"
#include "services/predict/model_image.h"

namespace dtrain::predict {

// NOT_FOUND for a missing file, INVALID_ARGUMENT naming the file for anything cairo
// cannot read as a PNG, or one of more than 64 Mi pixels (refused from its header,
// before anything is allocated). Transparent parts count as black (see GrayFromArgb32).
absl::StatusOr<GrayImage> ReadPngGray(const std::string& path);

// The same checks; the picture as three planes, red, green, blue (for colour models).
absl::StatusOr<ModelImage> ReadPngRgb(const std::string& path);

// Writes `image` as an 8-bit PNG (for tests and debugging).
absl::Status WritePngGray(const GrayImage& image, const std::string& path);

}  // namespace dtrain::predict
