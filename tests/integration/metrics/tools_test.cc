// `dtrain plot` on the CSV a real (one-process) training run wrote, and the clear
// errors of the new flags.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(120);

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

TEST(PlotTest, DrawsTheCsvOfARealRunAsPngAndSvg) {
  const std::string dir = MakeTempDir();
  const std::string prefix = dir + "/mlp";
  auto [code, out] = RunToEnd({Bin("dtrain-worker"), "--kv-store", "local", "--network", "mlp", "--num-epochs", "2",
                               "--num-examples", "1000", "--threads", "1", "--model-prefix", prefix},
                              kTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "Epoch[0] Train-cross-entropy=")) << out;
  const std::string csv = Slurp(prefix + "-metrics.csv");
  ASSERT_TRUE(absl::StartsWith(csv, "epoch,samples,")) << csv;
  EXPECT_TRUE(absl::StrContains(csv, "\n1,")) << csv;

  auto [png_code, png_out] = RunToEnd({Bin("dtrain"), "plot", prefix}, kTimeout);
  ASSERT_EQ(png_code, 0) << png_out;
  EXPECT_TRUE(absl::StrContains(png_out, "2 epochs")) << png_out;
  const std::string png = Slurp(prefix + "-metrics.png");
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  EXPECT_EQ(BigEndian32(png, 16), 1200u);  // width
  EXPECT_EQ(BigEndian32(png, 20), 900u);   // height

  auto [svg_code, svg_out] =
      RunToEnd({Bin("dtrain"), "plot", prefix, "--output", dir + "/curves.svg", "--size", "800x600"}, kTimeout);
  ASSERT_EQ(svg_code, 0) << svg_out;
  const std::string svg = Slurp(dir + "/curves.svg");
  EXPECT_TRUE(absl::StartsWith(svg, "<?xml")) << svg.substr(0, 200);
  EXPECT_TRUE(absl::StrContains(svg, "<svg")) << svg.substr(0, 400);
  EXPECT_TRUE(absl::StrContains(svg, "width=\"800\" height=\"600\"")) << svg.substr(0, 400);
  EXPECT_TRUE(absl::StrContains(svg, "validation")) << "the legend names the validation curve";
  std::filesystem::remove_all(dir);
}

struct BadFlag {
  std::vector<std::string> argv;
  int code;
  std::string says;
};

TEST(ToolFlagsTest, BadFlagsGiveClearErrors) {
  const std::string missing = MakeTempDir() + "/none";
  const BadFlag cases[] = {
      {{Bin("dtrain"), "status"}, 2, "--scheduler HOST:PORT is required"},
      {{Bin("dtrain"), "status", "--scheduler", "nohostport"}, 2, "HOST:PORT"},
      {{Bin("dtrain"), "status", "--scheduler", "127.0.0.1:1", "--timeout", "2"}, 1, "no answer from the scheduler"},
      {{Bin("dtrain"), "plot"}, 2, "expected one PREFIX"},
      {{Bin("dtrain"), "plot", missing}, 1, "cannot read " + missing + "-metrics.csv"},
      {{Bin("dtrain"), "plot", missing, "--format", "gif"}, 2, "--format must be png or svg"},
      {{Bin("dtrain"), "plot", missing, "--size", "big"}, 2, "--size"},
      {{Bin("dtrain"), "launch", "-n", "1", "--metrics-base-port", "-5"}, 2, "--metrics-base-port"},
      {{Bin("dtrain-server"), "--standalone", "--metrics-port", "70000"}, 2, "--metrics-port"},
      {{Bin("dtrain-scheduler"), "--metrics-port", "-3"}, 2, "--metrics-port"},
  };
  for (const BadFlag& c : cases) {
    auto [code, out] = RunToEnd(c.argv, absl::Seconds(30));
    EXPECT_EQ(code, c.code) << c.argv[1] << ": " << out;
    EXPECT_TRUE(absl::StrContains(out, c.says)) << "want \"" << c.says << "\" in: " << out;
  }
}

}  // namespace
}  // namespace dtrain::testing
