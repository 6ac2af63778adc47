// The CIFAR-10 binary reader (common/data/cifar_reader) and the data set loader that
// finds it (common/data/dataset): a worker's training data, and the batch file of
// `dtrain predict --images test_batch.bin`.
//
// Option byte, (options % 4):
//   0  ReadCifarBatch of one file
//   1  LoadDataset of a CIFAR-10 directory. The body is a 4-byte little-endian length,
//      a batch file of that length (written as data_batch_1.bin ... data_batch_5.bin
//      and test_batch.bin), then the class-names file: batches.meta.txt, or classes.txt
//      when bit 2 is set; bit 3 writes no names file (CIFAR-10's own list), bit 4 leaves
//      data_batch_5.bin out.
//   2  ReadClassNames of the body (batches.meta.txt, classes.txt)
//   3  ReadCifarBatch, then what `dtrain predict --images` does with it (predict_job.cc's
//      LoadCifar): every image (up to 4) fitted to the served model's input, whose shape
//      (from its symbol file, outside input too) bits 2-7 give: bit 2 three channels or
//      one, bits 3-7 the side (1 to 32).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/data/cifar_reader.h"
#include "common/data/dataset.h"
#include "services/predict/model_image.h"
#include "tests/fuzz/harness/fuzz_util.h"

namespace dtrain::fuzz {
namespace {

// What every batch that reads must be: whole records, labels within CIFAR-10's ten.
void CheckBatch(const data::ImageSet& set) {
  if (set.count < 1 || set.channels != data::kCifarChannels || set.rows != data::kCifarSide ||
      set.cols != data::kCifarSide ||
      set.pixels.size() != static_cast<size_t>(set.count * set.channels * set.rows * set.cols) ||
      set.labels.size() != static_cast<size_t>(set.count)) {
    abort();
  }
  for (uint8_t l : set.labels) {
    if (l >= data::kCifar10Classes) abort();
  }
}

void ReadBatch(std::string_view body) {
  absl::StatusOr<data::ImageSet> set = data::ReadCifarBatch(WriteScratch("fz-batch.bin", body));
  if (set.ok()) CheckBatch(*set);
}

void LoadDataset(uint8_t options, std::string_view body) {
  if (body.size() < 4) return;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= uint32_t{static_cast<uint8_t>(body[i])} << (8 * i);
  body.remove_prefix(4);
  const size_t batch_bytes = std::min<size_t>(n, body.size());
  const std::string_view batch = body.substr(0, batch_bytes), names = body.substr(batch_bytes);
  // A fresh directory per input: a names file or batch of the input before must not stay.
  const std::string dir = ScratchDir() + "/set";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directory(dir);
  const int train_batches = (options & 16) ? 4 : 5;
  for (int b = 1; b <= train_batches; ++b) WriteScratch("set/data_batch_" + std::to_string(b) + ".bin", batch);
  WriteScratch("set/test_batch.bin", batch);
  if (!(options & 8)) WriteScratch((options & 4) ? "set/classes.txt" : "set/batches.meta.txt", names);

  absl::StatusOr<data::Dataset> d = data::LoadDataset(dir);
  if (!d.ok()) return;
  if (train_batches != 5 || d->format != "cifar10" || d->class_names.empty()) abort();
  CheckBatch(d->train);
  CheckBatch(d->test);
  if (d->train.count != 5 * d->test.count) abort();
  for (const data::ImageSet* s : {&d->train, &d->test}) {
    for (uint8_t l : s->labels) {
      if (l >= d->class_names.size()) abort();
    }
  }
}

void ReadNames(std::string_view body) {
  absl::StatusOr<std::vector<std::string>> names = data::ReadClassNames(WriteScratch("fz-batches.meta.txt", body));
  if (!names.ok()) return;
  if (names->empty()) abort();
  for (const std::string& name : *names) {
    if (name.empty() || name.find('\n') != std::string::npos) abort();
  }
}

void PredictImages(uint8_t options, std::string_view body) {
  absl::StatusOr<data::ImageSet> set = data::ReadCifarBatch(WriteScratch("fz-test_batch.bin", body));
  if (!set.ok()) return;
  CheckBatch(*set);
  const int channels = (options & 4) ? 3 : 1;
  const int side = 1 + (options >> 3);
  const size_t per_image = static_cast<size_t>(set->channels * set->rows * set->cols);
  for (int64_t i = 0; i < std::min<int64_t>(set->count, 4); ++i) {
    predict::ModelImage img;
    img.channels = static_cast<int>(set->channels);
    img.height = static_cast<int>(set->rows);
    img.width = static_cast<int>(set->cols);
    const auto first = set->pixels.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(i) * per_image);
    img.pixels.assign(first, first + static_cast<std::ptrdiff_t>(per_image));
    const predict::ModelImage fitted = predict::FitToInput(img, channels, side, side);
    if (fitted.channels != channels || fitted.height != side || fitted.width != side ||
        fitted.pixels.size() != static_cast<size_t>(channels * side * side)) {
      abort();
    }
  }
}

}  // namespace
}  // namespace dtrain::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dtrain;
  const fuzz::Input in = fuzz::SplitOptions(data, size);
  switch (in.options % 4) {
    case 0: fuzz::ReadBatch(in.body); break;
    case 1: fuzz::LoadDataset(in.options, in.body); break;
    case 2: fuzz::ReadNames(in.body); break;
    default: fuzz::PredictImages(in.options, in.body); break;
  }
  return 0;
}
