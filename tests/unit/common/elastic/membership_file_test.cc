#include "common/elastic/membership_file.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

MembershipSchedule Example() {
  return *MembershipSchedule::Create(2, 4, {{0, {0, 1}}, {180, {0, 1, 2}}, {400, {0, 2, 3}}});
}

TEST(MembershipFileTest, RoundTripsExactly) {
  const std::string text = MembershipToJson(Example());
  EXPECT_EQ(text,
            "{\"format\": \"dtrain-membership-1\", \"min_workers\": 2, \"max_workers\": 4,\n"
            " \"generations\": [\n"
            "  {\"from_step\": 0, \"workers\": [0,1]},\n"
            "  {\"from_step\": 180, \"workers\": [0,1,2]},\n"
            "  {\"from_step\": 400, \"workers\": [0,2,3]}\n"
            " ]}\n");
  auto back = ParseMembershipJson(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == Example());
}

TEST(MembershipFileTest, WritesAtomicallyAndReadsBack) {
  testing::TempDir dir;
  const std::string path = dir.File("job-membership.json");
  ASSERT_TRUE(WriteMembershipFile(path, MembershipSchedule::Fixed(2)).ok());
  ASSERT_TRUE(WriteMembershipFile(path, Example()).ok());
  auto back = ReadMembershipFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == Example());
  EXPECT_EQ(dir.List(), std::vector<std::string>{"job-membership.json"});  // no temp file left
}

TEST(MembershipFileTest, NotJsonNamesTheLineAndColumn) {
  const auto s = ParseMembershipJson("{\"format\": \"dtrain-membership-1\",\n \"min_workers\": 2,,\n}");
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), StartsWith("line 2, column 19: not JSON"));
}

TEST(MembershipFileTest, WrongShapesNameTheField) {
  auto message = [](const std::string& text) { return std::string(ParseMembershipJson(text).status().message()); };
  const std::string head = "{\"format\": \"dtrain-membership-1\", \"min_workers\": 1, \"max_workers\": 4, ";
  EXPECT_THAT(message("[1]"), HasSubstr("expected a JSON object"));
  EXPECT_THAT(message("{\"format\": \"other\"}"), HasSubstr("format: expected \"dtrain-membership-1\""));
  EXPECT_THAT(message(head + "\"generations\": [{\"from_step\": 0, \"workers\": [0, \"a\"]}]}"),
              HasSubstr("generations[0].workers[1]: expected an integer, got \"a\""));
  EXPECT_THAT(message(head + "\"generations\": [{\"from_step\": 0}]}"), HasSubstr("generations[0].workers: missing"));
  EXPECT_THAT(message(head + "\"generations\": [{\"from_step\": 0, \"workers\": [0], \"form\": 1}]}"),
              HasSubstr("generations[0].form: unknown field"));
  EXPECT_THAT(message(head + "\"generations\": [{\"from_step\": 0, \"workers\": [0]}], \"extra\": 1}"),
              HasSubstr("extra: unknown field"));
  EXPECT_THAT(message(head + "\"generations\": {}}"), HasSubstr("generations: expected a list"));
  EXPECT_THAT(message("{\"format\": \"dtrain-membership-1\", \"max_workers\": 4, \"generations\": []}"),
              HasSubstr("min_workers: missing"));
  EXPECT_THAT(message(head + "\"generations\": [{\"from_step\": 18446744073709551615, \"workers\": [0]}]}"),
              HasSubstr("generations[0].from_step: 18446744073709551615 is out of range"));
  EXPECT_THAT(message(head + "\"generations\": [{\"from_step\": 1.5, \"workers\": [0]}]}"),
              HasSubstr("generations[0].from_step: expected an integer, got 1.5"));
  // A schedule rule, after the shapes.
  EXPECT_THAT(message(head + "\"generations\": [{\"from_step\": 0, \"workers\": [0]}, "
                             "{\"from_step\": 0, \"workers\": [1]}]}"),
              HasSubstr("generations[1].from_step: 0 is not after"));
}

TEST(MembershipFileTest, ReadErrorsNameThePathAndLeaveTheFileAlone) {
  testing::TempDir dir;
  const std::string path = dir.File("replay.json");
  const std::string broken = "{\"format\": \"dtrain-membership-1\"";
  { std::ofstream(path) << broken; }
  const auto s = ReadMembershipFile(path);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), StartsWith(path + ": line 1"));
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), broken);
  EXPECT_FALSE(ReadMembershipFile(dir.File("missing.json")).ok());
}

}  // namespace
}  // namespace dtrain::elastic
