// Which network to build, without LibTorch: --hidden lists and their limits.
#include "common/models/network_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::models {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NetworkSpecTest, ParsesHiddenLists) {
  EXPECT_THAT(*ParseHiddenList("2048,2048"), ElementsAre(2048, 2048));
  EXPECT_THAT(*ParseHiddenList(" 128 , 64 "), ElementsAre(128, 64));
  EXPECT_THAT(*ParseHiddenList("7"), ElementsAre(7));
  EXPECT_EQ(HiddenText({2048, 2048}), "2048,2048");
}

TEST(NetworkSpecTest, BadHiddenListsAreRefusedSayingWhy) {
  struct Case {
    std::string text;
    std::string why;
  };
  for (const Case& c : std::vector<Case>{{"", "empty list"},
                                         {"  ", "empty list"},
                                         {"2048,", "empty item"},
                                         {",2048", "empty item"},
                                         {"2048,,2048", "empty item"},
                                         {"2048,abc", "'abc' in '2048,abc' is not an integer"},
                                         {"1.5", "not an integer"},
                                         {"0", "width 0"},
                                         {"-3", "width -3"},
                                         {"65537", "width 65537"},
                                         {"99999999999999999999", "not an integer"},
                                         {"1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1", "has 17 layers"}}) {
    absl::StatusOr<std::vector<int64_t>> r = ParseHiddenList(c.text);
    ASSERT_FALSE(r.ok()) << "'" << c.text << "' was accepted";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    // Every refusal says what it is and what a good list looks like.
    EXPECT_THAT(r.status().message(), AllOf(HasSubstr(c.why), HasSubstr("such as 2048,2048"))) << c.text;
  }
}

TEST(NetworkSpecTest, ResolveFillsTheMlpDefaultAndChecksTheRest) {
  EXPECT_THAT(ResolveNetworkSpec("mlp", {})->hidden, ElementsAre(128, 64));
  EXPECT_THAT(ResolveNetworkSpec("mlp", {2048, 2048})->hidden, ElementsAre(2048, 2048));
  EXPECT_TRUE(ResolveNetworkSpec("lenet", {})->hidden.empty());

  absl::Status s = ResolveNetworkSpec("lenet", {2048}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("lenet"), HasSubstr("hidden widths are for the mlp")));

  s = ResolveNetworkSpec("vgg", {}).status();
  EXPECT_THAT(s.message(), AllOf(HasSubstr("unknown network \"vgg\""), HasSubstr("mlp, lenet, resnet, resnet18")));

  // Widths from a file are checked as a flag's are.
  EXPECT_THAT(ResolveNetworkSpec("mlp", {0}).status().message(), HasSubstr("hidden width 0"));
  // Each width is allowed, their product is not: 65536 x 65536 floats.
  s = ResolveNetworkSpec("mlp", {65536, 65536}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("more than the limit"));
}

// --num-layers: the resnet's depth is 6n+2 (20 unless given); other networks refuse one.
TEST(NetworkSpecTest, ResNetDepth) {
  EXPECT_EQ(ResolveNetworkSpec("resnet", {})->num_layers, 20);
  for (int layers : {8, 20, 56, 110, 1202})
    EXPECT_EQ(ResolveNetworkSpec("resnet", {}, 784, 10, layers)->num_layers, layers);
  for (int layers : {7, 21, 1208}) {
    absl::Status s = ResolveNetworkSpec("resnet", {}, 784, 10, layers).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << layers;
    EXPECT_THAT(s.message(), HasSubstr("is not 6n+2")) << layers;
  }
  EXPECT_THAT(ResolveNetworkSpec("lenet", {}, 784, 10, 20).status().message(), HasSubstr("the depth is for resnet"));
  EXPECT_THAT(ResolveNetworkSpec("resnet", {64}).status().message(), HasSubstr("hidden widths are for the mlp"));
  EXPECT_EQ(ResolveNetworkSpec("resnet18", {}, 784, 10, 18)->num_layers, 0);
  EXPECT_FALSE(ResolveNetworkSpec("resnet18", {}, 784, 10, 34).ok());
  EXPECT_EQ(ResolveNetworkSpec("mlp", {})->num_layers, 0);
}

}  // namespace
}  // namespace dtrain::models
