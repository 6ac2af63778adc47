// A training data set from a directory: its format found from the files, its images,
// and its classes from the data, never from the directory's name.
//
// Formats: CIFAR-10 binary (data_batch_N.bin, test_batch.bin: cifar_reader.h) when those
// files are there, else IDX (train-/t10k-images-idx3-ubyte[.gz]: idx_reader.h).
// Class names, first found wins:
//   1. DIR/classes.txt: one name per line, in label order (a trailing empty line is
//      ignored; empty names, or more than 100000, are refused);
//   2. CIFAR-10: DIR/batches.meta.txt (the same layout), else CIFAR-10's own list;
//   3. IDX: Fashion-MNIST's list when the training labels are Fashion-MNIST's (60000
//      28x28 images whose first 20 labels are Fashion-MNIST's); else the numbers "0" ..
//      "K-1", K = largest label + 1 (MNIST's classes are its digits).
// The class count is the number of names; every label must be below it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/image_set.h"

namespace dtrain::data {

struct Dataset {
  std::string format;  // "idx" or "cifar10"
  ImageSet train;
  ImageSet test;
  std::vector<std::string> class_names;  // one per class, label order
  std::string classes_from;              // where the names came from, for the log
};

// Reads both splits. Errors name the file: NOT_FOUND, DATA_LOSS from the readers, and
// DATA_LOSS for train and test images of different shapes, a label not below the class
// count (naming split, index and where the count came from), or a bad classes file.
absl::StatusOr<Dataset> LoadDataset(const std::string& dir);

// Lines of a class-names file (classes.txt, batches.meta.txt). DATA_LOSS naming the
// file for an empty file, an empty name between others, or more than 100000 names.
absl::StatusOr<std::vector<std::string>> ReadClassNames(const std::string& path);

// Fashion-MNIST's classes in label order.
std::vector<std::string> FashionMnistClassNames();

}  // namespace dtrain::data
