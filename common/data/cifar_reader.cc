#include "common/data/cifar_reader.h"

#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace dtrain::data {
namespace {

// Five training batches of 10000 records are 30.7 MB each; the cap only keeps a wrong
// path (a disk image) from being read whole.
constexpr size_t kMaxBatchBytes = size_t{1} << 30;
constexpr int kTrainBatches = 5;

}  // namespace

absl::StatusOr<ImageSet> ReadCifarBatch(const std::string& path) {
  DTRAIN_ASSIGN_OR_RETURN(std::string bytes, ReadFileLimited(path, kMaxBatchBytes));
  const size_t record = static_cast<size_t>(kCifarRecordBytes);
  if (bytes.empty()) return absl::DataLossError(absl::StrCat(path, ": empty file, want 3073-byte CIFAR records"));
  if (bytes.size() % record != 0) {
    return absl::DataLossError(absl::StrCat(path, ": ", bytes.size(), " bytes is ", bytes.size() / record,
                                            " whole CIFAR records of ", record, " bytes and ", bytes.size() % record,
                                            " bytes more: truncated or not a CIFAR-10 binary batch"));
  }
  ImageSet set;
  set.count = static_cast<int64_t>(bytes.size() / record);
  set.channels = kCifarChannels;
  set.rows = set.cols = kCifarSide;
  set.labels.resize(static_cast<size_t>(set.count));
  set.pixels.resize(static_cast<size_t>(set.count) * (record - 1));
  for (size_t i = 0; i < static_cast<size_t>(set.count); ++i) {
    const uint8_t label = static_cast<uint8_t>(bytes[i * record]);
    if (label >= kCifar10Classes) {
      return absl::DataLossError(absl::StrCat(path, ": record ", i, " has label ", int{label}, ", not in [0, ",
                                              kCifar10Classes,
                                              "): not a CIFAR-10 binary batch (CIFAR-100's "
                                              "records have two label bytes)"));
    }
    set.labels[i] = label;
    std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(i * record + 1),
              bytes.begin() + static_cast<std::ptrdiff_t>((i + 1) * record),
              set.pixels.begin() + static_cast<std::ptrdiff_t>(i * (record - 1)));
  }
  return set;
}

bool LooksLikeCifar10(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(dir) / "data_batch_1.bin", ec) ||
         std::filesystem::exists(std::filesystem::path(dir) / "test_batch.bin", ec);
}

absl::StatusOr<ImageSet> LoadCifar10(const std::string& dir, const std::string& split) {
  const std::string base = dir.empty() ? "" : dir + "/";
  if (split == "t10k" || split == "test") return ReadCifarBatch(base + "test_batch.bin");
  if (split != "train") {
    return absl::InvalidArgumentError(absl::StrCat("CIFAR-10 has splits train and test, not \"", split, "\""));
  }
  ImageSet all;
  for (int b = 1; b <= kTrainBatches; ++b) {
    DTRAIN_ASSIGN_OR_RETURN(ImageSet part, ReadCifarBatch(absl::StrCat(base, "data_batch_", b, ".bin")));
    if (b == 1) {
      all = std::move(part);
      continue;
    }
    all.count += part.count;
    all.pixels.insert(all.pixels.end(), part.pixels.begin(), part.pixels.end());
    all.labels.insert(all.labels.end(), part.labels.begin(), part.labels.end());
  }
  return all;
}

std::vector<std::string> Cifar10ClassNames() {
  return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}

}  // namespace dtrain::data
