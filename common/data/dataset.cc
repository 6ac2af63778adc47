#include "common/data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/data/cifar_reader.h"
#include "common/data/idx_reader.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace dtrain::data {
namespace {

constexpr size_t kMaxClassFileBytes = size_t{4} << 20;
constexpr size_t kMaxClasses = 100000;  // models::CreateNetwork's limit

// The first 20 labels of Fashion-MNIST's train-labels-idx1-ubyte. MNIST's start
// 5, 0, 4, 1, 9, ...; together with the size this tells the two apart without a name.
constexpr uint8_t kFashionMnistFirstLabels[] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5, 0, 9, 5, 5, 7, 9, 1, 0, 6, 4};

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

bool IsFashionMnist(const ImageSet& train) {
  constexpr size_t n = sizeof(kFashionMnistFirstLabels);
  return train.count == 60000 && train.channels == 1 && train.rows == 28 && train.cols == 28 &&
         std::equal(kFashionMnistFirstLabels, kFashionMnistFirstLabels + n, train.labels.begin());
}

std::vector<std::string> Numbers(int count) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(std::to_string(i));
  return out;
}

int LargestLabelPlusOne(const ImageSet& a, const ImageSet& b) {
  int most = 0;
  for (const ImageSet* s : {&a, &b}) {
    for (uint8_t l : s->labels) most = std::max(most, int{l} + 1);
  }
  return most;
}

absl::Status CheckLabels(const ImageSet& set, const char* split, size_t classes, const std::string& from) {
  for (size_t i = 0; i < set.labels.size(); ++i) {
    if (set.labels[i] >= classes) {
      return absl::DataLossError(absl::StrCat(split, " image ", i, " has label ", int{set.labels[i]}, ", but ", from,
                                              " gives ", classes, " classes (labels 0 to ", classes - 1, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> FashionMnistClassNames() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
}

absl::StatusOr<std::vector<std::string>> ReadClassNames(const std::string& path) {
  DTRAIN_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxClassFileBytes));
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    names.emplace_back(absl::StripAsciiWhitespace(line));
  }
  // Files end with a newline (batches.meta.txt ends with two): trailing empties are not names.
  while (!names.empty() && names.back().empty()) names.pop_back();
  if (names.empty()) return absl::DataLossError(absl::StrCat(path, ": no class names (want one per line)"));
  if (names.size() > kMaxClasses) {
    return absl::DataLossError(absl::StrCat(path, ": ", names.size(), " class names, more than ", kMaxClasses));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      return absl::DataLossError(absl::StrCat(path, ": line ", i + 1,
                                              " is empty (want one class name per line, "
                                              "in label order)"));
    }
  }
  return names;
}

absl::StatusOr<Dataset> LoadDataset(const std::string& dir) {
  Dataset d;
  const std::string base = dir.empty() ? "" : dir + "/";
  if (LooksLikeCifar10(dir)) {
    d.format = "cifar10";
    DTRAIN_ASSIGN_OR_RETURN(d.train, LoadCifar10(dir, "train"));
    DTRAIN_ASSIGN_OR_RETURN(d.test, LoadCifar10(dir, "test"));
  } else {
    d.format = "idx";
    DTRAIN_ASSIGN_OR_RETURN(d.train, LoadImageSet(dir, "train"));
    DTRAIN_ASSIGN_OR_RETURN(d.test, LoadImageSet(dir, "t10k"));
  }
  if (d.train.channels != d.test.channels || d.train.rows != d.test.rows || d.train.cols != d.test.cols) {
    return absl::DataLossError(absl::StrCat(dir, ": training images are ", d.train.channels, "x", d.train.rows, "x",
                                            d.train.cols, " but test images ", d.test.channels, "x", d.test.rows, "x",
                                            d.test.cols));
  }
  if (const std::string classes = base + "classes.txt"; Exists(classes)) {
    DTRAIN_ASSIGN_OR_RETURN(d.class_names, ReadClassNames(classes));
    d.classes_from = classes;
  } else if (d.format == "cifar10") {
    const std::string meta = base + "batches.meta.txt";
    if (Exists(meta)) {
      DTRAIN_ASSIGN_OR_RETURN(d.class_names, ReadClassNames(meta));
      d.classes_from = meta;
    } else {
      d.class_names = Cifar10ClassNames();
      d.classes_from = "CIFAR-10's class list";
    }
  } else if (IsFashionMnist(d.train)) {
    d.class_names = FashionMnistClassNames();
    d.classes_from = "Fashion-MNIST's class list (recognised from its labels)";
  } else {
    d.class_names = Numbers(LargestLabelPlusOne(d.train, d.test));
    d.classes_from = "the largest label (no classes.txt; classes named by number)";
  }
  DTRAIN_RETURN_IF_ERROR(CheckLabels(d.train, "training", d.class_names.size(), d.classes_from));
  DTRAIN_RETURN_IF_ERROR(CheckLabels(d.test, "test", d.class_names.size(), d.classes_from));
  return d;
}

}  // namespace dtrain::data
