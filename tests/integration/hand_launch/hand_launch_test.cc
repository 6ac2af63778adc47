// The README's hand launch (ps-lite's DMLC_* variables), run as written: only its
// scheduler address becomes 127.0.0.1 and its port a free one. It must train, exit
// 0 and leave no process behind, within a deadline.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "tests/integration/common/free_port.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

// $DTRAIN_TEST_README overrides (e.g. an older README, to show it failing).
std::string ReadReadme() {
  const char* override_path = std::getenv("DTRAIN_TEST_README");
  std::ifstream in(override_path != nullptr ? std::string(override_path)
                                            : std::string(DTRAIN_SOURCE_DIR) + "/README.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first ```sh block after the "By hand" heading.
std::string HandLaunchBlock(const std::string& readme) {
  const size_t heading = readme.find("### By hand");
  if (heading == std::string::npos) return "";
  const size_t open = readme.find("```sh\n", heading);
  if (open == std::string::npos) return "";
  const size_t close = readme.find("```", open + 6);
  return close == std::string::npos ? "" : readme.substr(open + 6, close - open - 6);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(HandLaunchTest, ReadmeBlockTrainsAndExitsZero) {
  const std::string block = HandLaunchBlock(ReadReadme());
  ASSERT_NE(block.find("DMLC_PS_ROOT_URI=10.0.0.1"), std::string::npos) << block;
  ASSERT_NE(block.find("DMLC_PS_ROOT_PORT=9091"), std::string::npos) << block;
  const std::string script = absl::StrReplaceAll(
      block, {{"10.0.0.1", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT=9091", absl::StrCat("DMLC_PS_ROOT_PORT=", FreePort())}});
  const std::string dir = MakeTempDir();
  std::ofstream(dir + "/hand_launch.sh") << script;
  const std::string bin_dir = std::filesystem::path(Bin("dtrain")).parent_path().string();
  const char* path = std::getenv("PATH");
  Subprocess job({"/bin/bash", "-c", absl::StrCat("cd '", dir, "' && exec bash hand_launch.sh")},
                 {{"PATH", absl::StrCat(bin_dir, ":", path != nullptr ? path : "/usr/bin:/bin")},
                  {"DTRAIN_ROLE", ""},
                  {"DMLC_ROLE", ""}});
  const int code = job.Wait(absl::Seconds(240));
  const std::string& out = job.output();
  ASSERT_NE(code, -1) << "the hand launch did not finish within 240 s:\n" << script << "\n" << out;
  EXPECT_EQ(code, 0) << script << "\n" << out;
  EXPECT_EQ(Count(out, "Training done:"), 2u) << out;  // both workers
  // A hand-launched process prefixes its lines as dtrain launch does ("[scheduler] TIME I done").
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\[scheduler\] [^\n]* I done\n)"))) << out;
  EXPECT_EQ(out.find("exiting with 1"), std::string::npos) << out;
  // Nothing of the job is left running (the group is the script's).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!(::kill(-job.pid(), 0) == -1 && errno == ESRCH) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(::kill(-job.pid(), 0) == -1 && errno == ESRCH) << "processes of the hand launch are still running";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtrain::testing
