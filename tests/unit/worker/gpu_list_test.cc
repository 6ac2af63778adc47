// --gpus: MXNet's comma list, refused by name when it is not one.
#include "services/worker/gpu_list.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

std::vector<int> Parsed(const std::string& text) {
  absl::StatusOr<std::vector<int>> gpus = ParseGpuList(text);
  EXPECT_TRUE(gpus.ok()) << text << ": " << gpus.status();
  return gpus.ok() ? *gpus : std::vector<int>{-1};
}

std::string Refusal(const std::string& text) {
  absl::StatusOr<std::vector<int>> gpus = ParseGpuList(text);
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(gpus.status().message());
}

TEST(GpuListTest, EmptyIsTheCpu) {
  EXPECT_EQ(Parsed(""), std::vector<int>{});
  EXPECT_EQ(Parsed("  "), std::vector<int>{});
}

TEST(GpuListTest, ACommaListKeepsItsOrder) {
  EXPECT_EQ(Parsed("0"), std::vector<int>{0});
  EXPECT_EQ(Parsed("0,1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(Parsed("3, 1 ,2"), (std::vector<int>{3, 1, 2}));
}

TEST(GpuListTest, WhatIsNotAListOfOrdinalsIsRefusedNamingTheItem) {
  EXPECT_EQ(Refusal("0-3"), "\"0-3\" is not a GPU ordinal (0..1023) (list each GPU: 0,1,2,3; ranges are not taken)");
  EXPECT_EQ(Refusal("0,-1"), "\"-1\" is not a GPU ordinal (0..1023)");
  EXPECT_EQ(Refusal("+1"), "\"+1\" is not a GPU ordinal (0..1023)");
  EXPECT_EQ(Refusal("gpu0"), "\"gpu0\" is not a GPU ordinal (0..1023)");
  EXPECT_EQ(Refusal("1024"), "\"1024\" is not a GPU ordinal (0..1023)");
  EXPECT_EQ(Refusal("99999999999"), "\"99999999999\" is not a GPU ordinal (0..1023)");
  EXPECT_EQ(Refusal("0,,1"), "\"0,,1\" has an empty item");
  EXPECT_EQ(Refusal("0,1,0"), "GPU 0 is listed twice (one replica per GPU)");
  std::string many;
  for (int g = 0; g <= kMaxGpusPerWorker; ++g) many += (g ? "," : "") + std::to_string(g);
  EXPECT_EQ(Refusal(many), "more than 64 GPUs");
}

}  // namespace
}  // namespace dtrain::worker
