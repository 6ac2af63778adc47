#include "common/checkpoint/safetensors.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::checkpoint {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::TempDir;
using testing::WriteBytes;

std::vector<NamedTensor> Sample() {
  return {
      {"conv1.weight", {2, 1, 2}, {1, -2, 3.5f, 0}},
      {"conv1.bias", {2}, {0.25f, std::numeric_limits<float>::infinity()}},
      {"scalar", {}, {42}},
  };
}

uint64_t HeaderLength(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return n;
}

TEST(SafetensorsTest, LayoutIsTheFormatsOwn) {
  absl::StatusOr<std::string> bytes = EncodeSafetensors(Sample(), {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const uint64_t n = HeaderLength(*bytes);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data starts 8-byte aligned";
  const std::string header = bytes->substr(8, n);
  EXPECT_EQ(header.find("{\"__metadata__\":{\"format\":\"pt\"},\"conv1.weight\":{\"dtype\":\"F32\",\"shape\":[2,1,2],"
                        "\"data_offsets\":[0,16]},\"conv1.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
                        "[16,24]},\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[24,28]}}"),
            0u)
      << header;
  EXPECT_EQ(header.find_first_not_of(' ', header.rfind('}') + 1), std::string::npos) << "padded with spaces";
  ASSERT_EQ(bytes->size(), 8 + n + 28);
  // Little-endian float32s: -2.0f is 0xC0000000.
  EXPECT_EQ(bytes->substr(8 + n + 4, 4), std::string("\x00\x00\x00\xc0", 4));
}

TEST(SafetensorsTest, RoundTripsThroughAFile) {
  TempDir dir;
  const std::string path = SafetensorsPath(dir.File("m"), 3);
  EXPECT_EQ(path, dir.File("m-0003.safetensors"));
  ASSERT_TRUE(WriteSafetensors(path, Sample(), {}).ok());
  absl::StatusOr<std::vector<NamedTensor>> back = ReadSafetensors(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0].name, "conv1.weight");
  EXPECT_THAT((*back)[0].shape, ElementsAre(2, 1, 2));
  EXPECT_EQ((*back)[0].data, Sample()[0].data);
  EXPECT_EQ((*back)[1].data, Sample()[1].data);
  EXPECT_TRUE((*back)[2].shape.empty());
  EXPECT_THAT(dir.List(), ElementsAre("m-0003.safetensors")) << "no temp file left";
}

TEST(SafetensorsTest, RefusesBadTensors) {
  EXPECT_THAT(EncodeSafetensors({{"__metadata__", {1}, {1}}}, {}).status().message(), HasSubstr("__"));
  EXPECT_THAT(EncodeSafetensors({{"a", {1}, {1}}, {"a", {1}, {2}}}, {}).status().message(), HasSubstr("unique"));
  EXPECT_THAT(EncodeSafetensors({{"a", {2, 2}, {1}}}, {}).status().message(), HasSubstr("1 values"));
  EXPECT_THAT(EncodeSafetensors({{"a", {-1}, {}}}, {}).status().message(), HasSubstr("bad shape"));
}

TEST(SafetensorsTest, ReaderRefusesTruncatedFiles) {
  TempDir dir;
  const std::string path = dir.File("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, Sample(), {}).ok());
  const std::string bytes = ReadBytes(path);
  WriteBytes(path, bytes.substr(0, bytes.size() - 1));
  EXPECT_EQ(ReadSafetensors(path).status().code(), absl::StatusCode::kDataLoss);
  WriteBytes(path, bytes.substr(0, 20));
  EXPECT_THAT(ReadSafetensors(path).status().message(), HasSubstr("does not fit"));
}

TEST(SafetensorsTest, ExportReadsTheParamsFileAndWritesNothingOnBadInput) {
  TempDir dir;
  const std::string prefix = dir.File("m");
  ASSERT_TRUE(WriteParams(ParamsPath(prefix, 2), Sample()).ok());
  const std::string out = dir.File("out.safetensors");
  ASSERT_TRUE(ExportSafetensors(prefix, 2, out).ok());
  absl::StatusOr<std::vector<NamedTensor>> back = ReadSafetensors(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)[0].data, Sample()[0].data);

  const std::string missing = dir.File("missing.safetensors");
  absl::Status s = ExportSafetensors(prefix, 5, missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("m-0005.params does not exist (epochs there: 2)"));

  std::string params = ReadBytes(ParamsPath(prefix, 2));
  params[20] ^= 0x10;
  WriteBytes(ParamsPath(prefix, 2), params);
  s = ExportSafetensors(prefix, 2, missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_FALSE(std::filesystem::exists(missing));
}

}  // namespace
}  // namespace dtrain::checkpoint
