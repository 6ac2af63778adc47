// IDX files (MNIST / Fashion-MNIST layout), raw or gzipped.
//
// Format: big-endian magic 0x0000TTDD (TT = 0x08 unsigned byte, DD = dimensions),
// DD big-endian uint32 sizes, then the data. Only unsigned-byte data is accepted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/image_set.h"

namespace dtrain::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // product(dims) bytes
};

// Reads `path`; a name ending in .gz (or gzip magic) is decompressed. Errors name the
// file and the problem: NOT_FOUND, or DATA_LOSS for a bad magic, truncated data,
// trailing bytes or a broken gzip stream.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path);

// `split` is "train" or "t10k": reads DIR/SPLIT-images-idx3-ubyte[.gz] and
// DIR/SPLIT-labels-idx1-ubyte[.gz] (whichever exists) as one-channel images and checks
// that the counts agree. Labels may be any byte: the class count comes from the data set
// (common/data/dataset.h), which checks them. Errors name the file.
absl::StatusOr<ImageSet> LoadImageSet(const std::string& dir, const std::string& split);

}  // namespace dtrain::data
