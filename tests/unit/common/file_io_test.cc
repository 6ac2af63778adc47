// common/file_io: the atomic writer and the size-capped reader.
#include "common/file_io.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::ReadBytes;
using testing::TempDir;

TEST(FileIoTest, AtomicWriteFailureNamesPathAndLeavesNoTemp) {
  TempDir dir;
  std::string path = dir.File("missing-dir/x.params");
  absl::Status s = WriteFileAtomically(path, "data");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_TRUE(dir.List().empty());

  ASSERT_TRUE(WriteFileAtomically(dir.File("f"), "abc").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.File("f"), "de").ok());
  EXPECT_EQ(ReadBytes(dir.File("f")), "de");
  EXPECT_THAT(dir.List(), ElementsAre("f"));
}

TEST(FileIoTest, LimitedReadRefusesALargerFileAndNamesIt) {
  TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.File("f"), "0123456789").ok());
  absl::StatusOr<std::string> whole = ReadFileLimited(dir.File("f"), 10);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, "0123456789");
  absl::StatusOr<std::string> capped = ReadFileLimited(dir.File("f"), 9);
  EXPECT_EQ(capped.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(capped.status().message(), HasSubstr(dir.File("f")));
  EXPECT_EQ(ReadFileLimited(dir.File("missing"), 10).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dtrain
