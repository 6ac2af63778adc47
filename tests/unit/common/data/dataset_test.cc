#include "common/data/dataset.h"

#include <string>
#include <vector>

#include "common/data/cifar_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::data {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteBytes;

std::string BigEndian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// An IDX images file of n images of 4x4 and its labels file.
void WriteIdxSplit(const TempDir& dir, const std::string& split, const std::vector<uint8_t>& labels) {
  std::string images = std::string("\0\0\x08\x03", 4) + BigEndian(labels.size()) + BigEndian(4) + BigEndian(4);
  images.append(labels.size() * 16, '\x10');
  std::string lab = std::string("\0\0\x08\x01", 4) + BigEndian(labels.size());
  for (uint8_t l : labels) lab.push_back(static_cast<char>(l));
  WriteBytes(dir.File(split + "-images-idx3-ubyte"), images);
  WriteBytes(dir.File(split + "-labels-idx1-ubyte"), lab);
}

std::string CifarRecords(const std::vector<uint8_t>& labels) {
  std::string out;
  for (uint8_t l : labels) {
    out.push_back(static_cast<char>(l));
    out.append(3072, '\x40');
  }
  return out;
}

void WriteCifar(const TempDir& dir) {
  for (int b = 1; b <= 5; ++b) WriteBytes(dir.File("data_batch_" + std::to_string(b) + ".bin"), CifarRecords({0, 9}));
  WriteBytes(dir.File("test_batch.bin"), CifarRecords({4}));
}

// Without classes.txt an IDX set that is not Fashion-MNIST has numbered classes, as many
// as its largest label + 1, whatever the directory is called.
TEST(DatasetTest, IdxClassesFromTheLabels) {
  TempDir dir;
  WriteIdxSplit(dir, "train", {0, 3, 1});
  WriteIdxSplit(dir, "t10k", {4});
  absl::StatusOr<Dataset> d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->format, "idx");
  EXPECT_THAT(d->class_names, ElementsAre("0", "1", "2", "3", "4"));
  EXPECT_EQ(d->train.channels, 1);
  EXPECT_EQ(d->train.rows, 4);
}

TEST(DatasetTest, ClassesFileNamesTheClassesAndBoundsTheLabels) {
  TempDir dir;
  WriteIdxSplit(dir, "train", {0, 2, 1});
  WriteIdxSplit(dir, "t10k", {1});
  WriteBytes(dir.File("classes.txt"), "cat\ndog\n  bird \n\n");
  absl::StatusOr<Dataset> d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->class_names, ElementsAre("cat", "dog", "bird"));
  EXPECT_THAT(d->classes_from, HasSubstr("classes.txt"));

  WriteBytes(dir.File("classes.txt"), "cat\ndog\n");
  absl::Status s = LoadDataset(dir.path()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("training image 1 has label 2"), HasSubstr("classes.txt"), HasSubstr("gives 2 classes")));

  WriteBytes(dir.File("classes.txt"), "cat\n\ndog\nbird\n");
  EXPECT_THAT(LoadDataset(dir.path()).status().message(), HasSubstr("line 2 is empty"));
  WriteBytes(dir.File("classes.txt"), "\n");
  EXPECT_THAT(LoadDataset(dir.path()).status().message(), HasSubstr("no class names"));
}

TEST(DatasetTest, CifarFormatAndItsClasses) {
  TempDir dir;
  WriteCifar(dir);
  absl::StatusOr<Dataset> d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->format, "cifar10");
  EXPECT_EQ(d->train.count, 10);
  EXPECT_EQ(d->train.channels, 3);
  EXPECT_EQ(d->class_names, Cifar10ClassNames());
  // batches.meta.txt (as the archive ships it: a name per line, then an empty line).
  WriteBytes(dir.File("batches.meta.txt"), "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n\n");
  d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->class_names.front(), "a");
  EXPECT_EQ(d->class_names.size(), 10u);
}

TEST(DatasetTest, TrainAndTestShapesMustAgree) {
  TempDir dir;
  WriteIdxSplit(dir, "train", {0});
  std::string images = std::string("\0\0\x08\x03", 4) + BigEndian(1) + BigEndian(5) + BigEndian(5);
  images.append(25, '\0');
  WriteBytes(dir.File("t10k-images-idx3-ubyte"), images);
  WriteBytes(dir.File("t10k-labels-idx1-ubyte"), std::string("\0\0\x08\x01", 4) + BigEndian(1) + std::string(1, '\0'));
  EXPECT_THAT(LoadDataset(dir.path()).status().message(),
              AllOf(HasSubstr("training images are 1x4x4"), HasSubstr("test images 1x5x5")));
}

}  // namespace
}  // namespace dtrain::data
