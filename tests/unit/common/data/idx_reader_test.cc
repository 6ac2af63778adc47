#include "common/data/idx_reader.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteBytes;

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// An IDX image of unsigned bytes: magic 0x000008DD, big-endian sizes, data 0, 1, 2...
std::string MakeIdx(const std::vector<uint32_t>& dims, uint8_t type = 0x08) {
  std::string out = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(d >> shift));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(i % 7));
  return out;
}

std::string Gzip(const std::string& in) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, in.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = in.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(IdxReaderTest, ReadsRawAndGzipAlike) {
  TempDir dir;
  std::string idx = MakeIdx({3, 2, 4});
  WriteBytes(dir.File("a.idx"), idx);
  WriteBytes(dir.File("a.idx.gz"), Gzip(idx));
  // Gzip is detected by magic bytes, not by the name.
  WriteBytes(dir.File("b.idx"), Gzip(idx));
  for (const char* name : {"a.idx", "a.idx.gz", "b.idx"}) {
    absl::StatusOr<data::IdxArray> a = data::ReadIdx(dir.File(name));
    ASSERT_TRUE(a.ok()) << name << ": " << a.status();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{3, 2, 4})) << name;
    ASSERT_EQ(a->data.size(), 24u) << name;
    EXPECT_EQ(a->data[0], 0);
    EXPECT_EQ(a->data[23], 23 % 7);
  }
}

TEST(IdxReaderTest, ReadsConcatenatedGzipMembers) {
  TempDir dir;
  std::string idx = MakeIdx({100});
  WriteBytes(dir.File("x.gz"), Gzip(idx.substr(0, 50)) + Gzip(idx.substr(50)));
  absl::StatusOr<data::IdxArray> a = data::ReadIdx(dir.File("x.gz"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->data.size(), 100u);
}

TEST(IdxReaderTest, MissingFileIsNotFoundNamingPath) {
  TempDir dir;
  absl::StatusOr<data::IdxArray> a = data::ReadIdx(dir.File("nope.idx"));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a.status().message(), HasSubstr(dir.File("nope.idx")));
}

TEST(IdxReaderTest, DirectoryIsAnErrorNotACrash) {
  TempDir dir;
  EXPECT_FALSE(data::ReadIdx(dir.path()).ok());
}

TEST(IdxReaderTest, TruncatedDataNamesExpectedAndActualSizes) {
  TempDir dir;
  std::string idx = MakeIdx({3, 2, 4});
  std::string cut = idx.substr(0, idx.size() - 1);
  WriteBytes(dir.File("t.idx"), cut);
  WriteBytes(dir.File("t.idx.gz"), Gzip(cut));  // a whole gzip stream of a short file
  for (const char* name : {"t.idx", "t.idx.gz"}) {
    absl::Status s = data::ReadIdx(dir.File(name)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << name;
    EXPECT_THAT(s.message(), AllOf(HasSubstr(dir.File(name)), HasSubstr("truncated"), HasSubstr("3x2x4"),
                                   HasSubstr("24 data bytes"), HasSubstr("has 23")));
  }
}

TEST(IdxReaderTest, TruncatedHeaderIsDataLoss) {
  TempDir dir;
  WriteBytes(dir.File("h"), MakeIdx({3, 2, 4}).substr(0, 9));
  absl::Status s = data::ReadIdx(dir.File("h")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("truncated IDX header"));
  WriteBytes(dir.File("e"), "");
  EXPECT_EQ(data::ReadIdx(dir.File("e")).status().code(), absl::StatusCode::kDataLoss);
}

TEST(IdxReaderTest, BadMagicIsRefused) {
  TempDir dir;
  std::string float_type = MakeIdx({4}, /*type=*/0x0d);
  std::string nonzero = MakeIdx({4});
  nonzero[0] = 1;
  std::string no_dims = MakeIdx({});
  std::string five_dims = MakeIdx({1, 1, 1, 1, 1});
  for (const std::string& bytes : {float_type, nonzero, no_dims, five_dims}) {
    WriteBytes(dir.File("m"), bytes);
    absl::Status s = data::ReadIdx(dir.File("m")).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), AllOf(HasSubstr(dir.File("m")), HasSubstr("bad IDX magic")));
  }
}

TEST(IdxReaderTest, TrailingBytesAreRefused) {
  TempDir dir;
  WriteBytes(dir.File("t"), MakeIdx({5}) + "xyz");
  absl::Status s = data::ReadIdx(dir.File("t")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("3 trailing bytes"), HasSubstr("5 data bytes")));
}

TEST(IdxReaderTest, HugeHeaderIsRefusedWithoutAllocating) {
  TempDir dir;
  std::string idx = MakeIdx({0, 0, 0, 0});
  for (size_t i = 4; i < idx.size(); ++i) idx[i] = static_cast<char>(0xff);
  WriteBytes(dir.File("big"), idx);
  EXPECT_EQ(data::ReadIdx(dir.File("big")).status().code(), absl::StatusCode::kDataLoss);
}

TEST(IdxReaderTest, CorruptGzipIsDataLoss) {
  TempDir dir;
  std::string gz = Gzip(MakeIdx({50, 20}));
  std::string flipped = gz;
  flipped[gz.size() / 2] ^= 0x5a;
  std::string bad_crc = gz;
  bad_crc[gz.size() - 6] ^= 0x01;  // inside the gzip trailer's CRC-32
  std::string cut = gz.substr(0, gz.size() / 2);
  std::string garbage = gz + "not gzip";
  for (const std::string& bytes : {flipped, bad_crc, cut, garbage}) {
    WriteBytes(dir.File("c.gz"), bytes);
    absl::Status s = data::ReadIdx(dir.File("c.gz")).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(), HasSubstr(dir.File("c.gz")));
  }
  WriteBytes(dir.File("c.gz"), cut);
  EXPECT_THAT(data::ReadIdx(dir.File("c.gz")).status().message(), HasSubstr("truncated"));
  WriteBytes(dir.File("raw.gz"), MakeIdx({4}));
  EXPECT_THAT(data::ReadIdx(dir.File("raw.gz")).status().message(), HasSubstr("not gzip data"));
}

// Writes SPLIT-images-idx3-ubyte and SPLIT-labels-idx1-ubyte into `dir`.
void WriteSet(const TempDir& dir, const std::string& images, const std::string& labels) {
  WriteBytes(dir.File("train-images-idx3-ubyte"), images);
  WriteBytes(dir.File("train-labels-idx1-ubyte"), labels);
}

TEST(LoadImageSetTest, LoadsSmallSetAndPrefersGz) {
  TempDir dir;
  WriteSet(dir, MakeIdx({3, 4, 5}), MakeIdx({3}));
  absl::StatusOr<data::ImageSet> set = data::LoadImageSet(dir.path(), "train");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->count, 3);
  EXPECT_EQ(set->rows, 4);
  EXPECT_EQ(set->cols, 5);
  EXPECT_EQ(set->pixels.size(), 60u);
  EXPECT_EQ(set->labels, (std::vector<uint8_t>{0, 1, 2}));

  // A .gz next to the raw file wins: here it holds a different count, which shows.
  WriteBytes(dir.File("train-images-idx3-ubyte.gz"), Gzip(MakeIdx({2, 4, 5})));
  WriteBytes(dir.File("train-labels-idx1-ubyte.gz"), Gzip(MakeIdx({2})));
  set = data::LoadImageSet(dir.path(), "train");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->count, 2);
}

TEST(LoadImageSetTest, CountMismatchNamesBothFiles) {
  TempDir dir;
  WriteSet(dir, MakeIdx({3, 4, 5}), MakeIdx({2}));
  absl::Status s = data::LoadImageSet(dir.path(), "train").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("train-images-idx3-ubyte holds 3 images"),
                                 HasSubstr("train-labels-idx1-ubyte holds 2 labels")));
}

TEST(LoadImageSetTest, RefusesWrongRanks) {
  TempDir dir;
  WriteSet(dir, MakeIdx({3, 20}), MakeIdx({3}));
  EXPECT_THAT(data::LoadImageSet(dir.path(), "train").status().message(), HasSubstr("expected 3 dimensions"));
  WriteSet(dir, MakeIdx({3, 4, 5}), MakeIdx({3, 1}));
  EXPECT_THAT(data::LoadImageSet(dir.path(), "train").status().message(), HasSubstr("expected 1 dimension"));
}

// The class count is the data set's (common/data/dataset.h checks labels against it):
// the IDX reader takes any label byte, so a 12-class IDX set reads.
TEST(LoadImageSetTest, AnyLabelByteReads) {
  TempDir dir;
  std::string labels = MakeIdx({3});
  labels.back() = 11;
  WriteSet(dir, MakeIdx({3, 4, 5}), labels);
  absl::StatusOr<data::ImageSet> set = data::LoadImageSet(dir.path(), "train");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->labels.back(), 11);
  EXPECT_EQ(set->channels, 1);
}

TEST(LoadImageSetTest, MissingFilesAreNotFound) {
  TempDir dir;
  absl::Status s = data::LoadImageSet(dir.path(), "t10k").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(dir.File("t10k-images-idx3-ubyte")));
}

// The expected values were read at test-writing time with an independent reader:
//   python3 -c "import gzip; b=gzip.open('train-labels-idx1-ubyte.gz').read();
//               print(list(b[8:18]))"             -> [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
//   sum(gzip.open('train-images-idx3-ubyte.gz').read()[16:16+784]) -> 76247
// and for t10k: labels [9, 2, 1, 1, 6, ...], first image's pixel sum 33456.
TEST(LoadImageSetTest, ReadsRealFashionMnist) {
  if (!std::filesystem::exists(kFashionMnistDir)) GTEST_SKIP() << kFashionMnistDir << " missing";
  absl::StatusOr<data::ImageSet> train = data::LoadImageSet(kFashionMnistDir, "train");
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->count, 60000);
  EXPECT_EQ(train->rows, 28);
  EXPECT_EQ(train->cols, 28);
  ASSERT_EQ(train->pixels.size(), 60000u * 28 * 28);
  ASSERT_EQ(train->labels.size(), 60000u);
  EXPECT_EQ(std::vector<uint8_t>(train->labels.begin(), train->labels.begin() + 10),
            (std::vector<uint8_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  int64_t first_sum = 0;
  for (int i = 0; i < 28 * 28; ++i) first_sum += train->pixels[i];
  EXPECT_EQ(first_sum, 76247);
  for (uint8_t l : train->labels) ASSERT_LT(l, 10);

  absl::StatusOr<data::ImageSet> test = data::LoadImageSet(kFashionMnistDir, "t10k");
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(test->count, 10000);
  EXPECT_EQ(test->labels[0], 9);
  EXPECT_EQ(test->labels[1], 2);
  first_sum = 0;
  for (int i = 0; i < 28 * 28; ++i) first_sum += test->pixels[i];
  EXPECT_EQ(first_sum, 33456);
}

}  // namespace
}  // namespace dtrain::data
