#include "common/data/cifar_reader.h"

#include <filesystem>
#include <string>
#include <vector>

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

// `labels.size()` records; image i's pixel p (of 3072) is (i * 7 + p) % 256.
std::string CifarRecords(const std::vector<uint8_t>& labels) {
  std::string out;
  for (size_t i = 0; i < labels.size(); ++i) {
    out.push_back(static_cast<char>(labels[i]));
    for (int p = 0; p < 3072; ++p) out.push_back(static_cast<char>((i * 7 + p) % 256));
  }
  return out;
}

TEST(CifarReaderTest, ReadsRecordsChannelMajor) {
  TempDir dir;
  WriteBytes(dir.File("b.bin"), CifarRecords({3, 9, 0}));
  absl::StatusOr<ImageSet> set = ReadCifarBatch(dir.File("b.bin"));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->count, 3);
  EXPECT_EQ(set->channels, 3);
  EXPECT_EQ(set->rows, 32);
  EXPECT_EQ(set->cols, 32);
  EXPECT_THAT(set->labels, ElementsAre(3, 9, 0));
  ASSERT_EQ(set->pixels.size(), 3u * 3072);
  // Image 1, green plane (offset 1024), row 2, column 5: the file's byte order as is.
  EXPECT_EQ(set->pixels[3072 + 1024 + 2 * 32 + 5], (7 + 1024 + 2 * 32 + 5) % 256);
}

TEST(CifarReaderTest, TruncatedOrCorruptFilesAreClearErrors) {
  TempDir dir;
  std::string records = CifarRecords({1, 2});
  WriteBytes(dir.File("cut.bin"), records.substr(0, records.size() - 100));
  absl::Status s = ReadCifarBatch(dir.File("cut.bin")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(dir.File("cut.bin")), HasSubstr("6046 bytes is 1 whole CIFAR records"),
                                 HasSubstr("2973 bytes more"), HasSubstr("truncated")));

  WriteBytes(dir.File("empty.bin"), "");
  EXPECT_THAT(ReadCifarBatch(dir.File("empty.bin")).status().message(), HasSubstr("empty file"));

  // CIFAR-100 (two label bytes) or random bytes: a label outside 0..9 says so.
  std::string bad = CifarRecords({1, 2, 3});
  bad[2 * 3073] = static_cast<char>(57);
  WriteBytes(dir.File("bad.bin"), bad);
  s = ReadCifarBatch(dir.File("bad.bin")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("record 2 has label 57"), HasSubstr("not a CIFAR-10 binary batch")));

  EXPECT_EQ(ReadCifarBatch(dir.File("missing.bin")).status().code(), absl::StatusCode::kNotFound);
}

TEST(CifarReaderTest, LoadsTheSplits) {
  TempDir dir;
  EXPECT_FALSE(LooksLikeCifar10(dir.path()));
  for (int b = 1; b <= 5; ++b) {
    WriteBytes(dir.File("data_batch_" + std::to_string(b) + ".bin"), CifarRecords({uint8_t(b), uint8_t(b)}));
  }
  WriteBytes(dir.File("test_batch.bin"), CifarRecords({7}));
  EXPECT_TRUE(LooksLikeCifar10(dir.path()));
  absl::StatusOr<ImageSet> train = LoadCifar10(dir.path(), "train");
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->count, 10);
  EXPECT_THAT(train->labels, ElementsAre(1, 1, 2, 2, 3, 3, 4, 4, 5, 5));
  EXPECT_EQ(train->pixels.size(), 10u * 3072);
  absl::StatusOr<ImageSet> test = LoadCifar10(dir.path(), "t10k");
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_THAT(test->labels, ElementsAre(7));
  EXPECT_EQ(LoadCifar10(dir.path(), "valid").status().code(), absl::StatusCode::kInvalidArgument);

  // A missing batch is named.
  std::filesystem::remove(dir.File("data_batch_4.bin"));
  absl::Status s = LoadCifar10(dir.path(), "train").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("data_batch_4.bin"));
}

}  // namespace
}  // namespace dtrain::data
