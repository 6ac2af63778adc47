// CIFAR-10's binary version (cifar-10-batches-bin): data_batch_1.bin ... data_batch_5.bin
// (10000 images each) and test_batch.bin. Each record is one label byte then 3072 bytes
// of pixels: the 1024 red values of the 32x32 image row by row, then green, then blue
// (channel-major, the order a [3, 32, 32] tensor has). No header: the file size must be
// a whole number of records. batches.meta.txt names the classes, one per line.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/image_set.h"

namespace dtrain::data {

inline constexpr int64_t kCifarSide = 32;
inline constexpr int64_t kCifarChannels = 3;
inline constexpr int64_t kCifarRecordBytes = 1 + kCifarChannels * kCifarSide * kCifarSide;  // 3073
inline constexpr int kCifar10Classes = 10;

// One batch file as a 3x32x32 ImageSet. NOT_FOUND for a missing file; DATA_LOSS naming
// the file for an empty file, a size that is not a whole number of 3073-byte records
// (a truncated download: it says how many records and bytes are there), or a label
// >= 10 (naming the record).
absl::StatusOr<ImageSet> ReadCifarBatch(const std::string& path);

// True when DIR holds CIFAR-10 binary files (data_batch_1.bin or test_batch.bin).
bool LooksLikeCifar10(const std::string& dir);

// `split` "train": data_batch_1.bin ... data_batch_5.bin, concatenated in that order (all
// five must be there: NOT_FOUND naming the missing one); "t10k" or "test": test_batch.bin.
// INVALID_ARGUMENT for another split.
absl::StatusOr<ImageSet> LoadCifar10(const std::string& dir, const std::string& split);

// CIFAR-10's classes in label order (airplane ... truck), as batches.meta.txt lists them.
std::vector<std::string> Cifar10ClassNames();

}  // namespace dtrain::data
