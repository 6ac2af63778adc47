// The picture `dtrain predict --render` draws: the images in a grid, each captioned with
// the predicted class and probability and, when known, the true class; wrong answers
// framed and captioned in red. People check a classifier faster by looking than by
// reading a column of numbers. Drawn and written with cairo.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "services/predict/model_image.h"

namespace dtrain::predict {

struct GridCell {
  ModelImage image;  // gray or colour
  std::string predicted;
  float probability = 0;
  std::string truth;  // empty when unknown
  bool wrong = false;
};

struct GridLayout {
  int columns = 10;
  int scale = 3;  // each image pixel becomes scale x scale
};

// Writes a PNG to `path` with `title` on top. INVALID_ARGUMENT for no cells or a grid
// beyond cairo's 32767-pixel limit; INTERNAL naming the file if it cannot be written.
absl::Status RenderGrid(const std::vector<GridCell>& cells, const std::string& title, const std::string& path,
                        const GridLayout& layout = {});

}  // namespace dtrain::predict
