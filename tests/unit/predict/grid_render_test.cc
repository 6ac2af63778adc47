#include "services/predict/grid_render.h"

#include <stdlib.h>

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/predict/png_io.h"

namespace dtrain::predict {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "dtrain-predict-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << tmpl;
  return tmpl;
}

GrayImage Gradient(int w, int h) {
  GrayImage g{w, h, {}};
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) g.pixels.push_back(static_cast<uint8_t>((x * 255) / (w - 1)));
  }
  return g;
}

TEST(PredictImageTest, PngRoundTripsThroughCairo) {
  const std::string dir = TempDir();
  const GrayImage g = Gradient(30, 7);
  ASSERT_TRUE(WritePngGray(g, dir + "/g.png").ok());
  auto back = ReadPngGray(dir + "/g.png");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, 30);
  EXPECT_EQ(back->height, 7);
  EXPECT_EQ(back->pixels, g.pixels);
  std::filesystem::remove_all(dir);
}

TEST(PredictImageTest, UnreadablePngsAreNamed) {
  const std::string dir = TempDir();
  EXPECT_EQ(ReadPngGray(dir + "/none.png").status().code(), absl::StatusCode::kNotFound);
  FILE* f = fopen((dir + "/text.png").c_str(), "w");
  fputs("not a png", f);
  fclose(f);
  auto bad = ReadPngGray(dir + "/text.png");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(dir + "/text.png: cannot read as PNG"));
  std::filesystem::remove_all(dir);
}

// tests/fuzz/regressions/predict_image/claims_20000x20000 (69 bytes): cairo would allocate
// 1.6 GB for it (and this reader as much again) before finding the pixels missing.
TEST(PredictImageTest, HugeDimensionsAreRefusedFromTheHeader) {
  const std::string dir = TempDir();
  // Signature, then IHDR: length 13, "IHDR", width 20000, height 20000, 8-bit gray.
  const unsigned char png[] = {0x89, 'P', 'N', 'G',  '\r', '\n', 0x1a, '\n', 0,    0, 0, 13, 'I', 'H', 'D',
                               'R',  0,   0,   0x4e, 0x20, 0,    0,    0x4e, 0x20, 8, 0, 0,  0,   0};
  FILE* f = fopen((dir + "/huge.png").c_str(), "wb");
  fwrite(png, 1, sizeof(png), f);
  fclose(f);
  auto huge = ReadPngGray(dir + "/huge.png");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("20000 x 20000 pixels is more than"));
  std::filesystem::remove_all(dir);
}

TEST(PredictImageTest, GridHasOneCellPerImageInRowsOfTheColumnCount) {
  const std::string dir = TempDir();
  std::vector<GridCell> cells;
  for (int i = 0; i < 13; ++i) {
    cells.push_back({Gradient(28, 28), "Sneaker", 0.97f, i % 4 == 0 ? "Sandal" : "Sneaker", i % 4 == 0});
  }
  GridLayout layout;
  layout.columns = 5;
  ASSERT_TRUE(RenderGrid(cells, "test grid", dir + "/grid.png", layout).ok());
  auto grid = ReadPngGray(dir + "/grid.png");
  ASSERT_TRUE(grid.ok()) << grid.status();
  // 5 columns of at least 28*3 px; 3 rows under a title band.
  EXPECT_GE(grid->width, 5 * 84);
  EXPECT_GE(grid->height, 3 * 84);
  EXPECT_LT(grid->height, 5 * 200);

  EXPECT_EQ(RenderGrid({}, "empty", dir + "/empty.png").code(), absl::StatusCode::kInvalidArgument);
  auto unwritable = RenderGrid(cells, "t", dir + "/no/such/dir/grid.png");
  EXPECT_EQ(unwritable.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(unwritable.message()), HasSubstr("cannot write " + dir + "/no/such/dir/grid.png"));
  std::vector<GridCell> many(3000, cells[0]);
  layout.columns = 10;
  EXPECT_THAT(std::string(RenderGrid(many, "t", dir + "/big.png", layout).message()), HasSubstr("render fewer"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtrain::predict
