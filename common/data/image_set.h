// A labelled image set in memory, whatever file format it came from.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain::data {

struct ImageSet {
  int64_t count = 0, rows = 0, cols = 0;
  int64_t channels = 1;         // 1 for IDX (grayscale), 3 for CIFAR (RGB)
  std::vector<uint8_t> pixels;  // count * channels * rows * cols, each image channel-major (C, H, W)
  std::vector<uint8_t> labels;  // count; the readers only check them against a class count they know
};

}  // namespace dtrain::data
