#include "common/elastic/elastic_spec.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;

TEST(ElasticSpecTest, ParsesBoundsAndRefusesBadOnesNamingTheText) {
  auto s = ParseElasticBounds("2:4");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->min_workers, 2);
  EXPECT_EQ(s->max_workers, 4);
  EXPECT_FALSE(ParseElasticBounds("")->enabled());
  EXPECT_EQ(ParseElasticBounds("3:2").status().message(), "--elastic 3:2: MIN 3 is above MAX 2");
  EXPECT_THAT(ParseElasticBounds("0:2").status().message(), HasSubstr("MIN must be at least 1, got 0"));
  EXPECT_THAT(ParseElasticBounds("4").status().message(), HasSubstr("expected MIN:MAX"));
  EXPECT_THAT(ParseElasticBounds("a:4").status().message(), HasSubstr("expected MIN:MAX"));
  EXPECT_THAT(ParseElasticBounds("1:2:3").status().message(), HasSubstr("expected MIN:MAX"));
  EXPECT_THAT(ParseElasticBounds("1:10001").status().message(), HasSubstr("over the limit 10000"));
}

TEST(ElasticSpecTest, ChecksTheStartingWorkerCountAndTheMode) {
  const ElasticSpec spec = *ParseElasticBounds("2:4");
  EXPECT_TRUE(CheckElasticSpec(spec, 2, KVStoreMode::kDistSync).ok());
  EXPECT_TRUE(CheckElasticSpec(spec, 4, KVStoreMode::kDistSync).ok());
  EXPECT_EQ(CheckElasticSpec(spec, 5, KVStoreMode::kDistSync).message(),
            "--num-workers 5 is above --elastic 2:4's MAX 4");
  EXPECT_EQ(CheckElasticSpec(spec, 1, KVStoreMode::kDistSync).message(),
            "--num-workers 1 is below --elastic 2:4's MIN 2");
  EXPECT_THAT(CheckElasticSpec(spec, 2, KVStoreMode::kDistAsync).message(), HasSubstr("needs --kv-store dist_sync"));
}

TEST(ElasticSpecTest, LrAndReplayOnlyWithElastic) {
  ElasticSpec off;
  EXPECT_TRUE(CheckElasticSpec(off, 3, KVStoreMode::kDistAsync).ok());
  off.lr = ElasticLr::kKeep;
  EXPECT_THAT(CheckElasticSpec(off, 3, KVStoreMode::kDistSync).message(), HasSubstr("--elastic-lr needs --elastic"));
  off.lr = ElasticLr::kScale;
  off.replay_membership = "run-membership.json";
  EXPECT_THAT(CheckElasticSpec(off, 3, KVStoreMode::kDistSync).message(),
              HasSubstr("--replay-membership needs --elastic"));
}

TEST(ElasticSpecTest, LrFactorScalesLinearlyOrKeeps) {
  EXPECT_DOUBLE_EQ(ElasticLrFactor(ElasticLr::kScale, 3, 2), 1.5);
  EXPECT_DOUBLE_EQ(ElasticLrFactor(ElasticLr::kScale, 2, 2), 1.0);
  EXPECT_DOUBLE_EQ(ElasticLrFactor(ElasticLr::kKeep, 3, 2), 1.0);
  EXPECT_EQ(*ParseElasticLr("keep"), ElasticLr::kKeep);
  EXPECT_THAT(ParseElasticLr("linear").status().message(), HasSubstr("scale or keep, got 'linear'"));
}

TEST(ElasticSpecTest, FlagsBindTheSpecAndTheEnvironment) {
  ElasticSpec spec;
  FlagSet flags("prog", "test");
  AddElasticFlags(flags, &spec);
  ASSERT_TRUE(flags.Parse({"--elastic", "2:5", "--elastic-lr", "keep", "--replay-membership", "m.json"}).ok());
  EXPECT_EQ(spec.min_workers, 2);
  EXPECT_EQ(spec.max_workers, 5);
  EXPECT_EQ(spec.lr, ElasticLr::kKeep);
  EXPECT_EQ(spec.replay_membership, "m.json");
  ElasticSpec bad;
  FlagSet bad_flags("prog", "test");
  AddElasticFlags(bad_flags, &bad);
  EXPECT_THAT(bad_flags.Parse({"--elastic", "3:2"}).message(), HasSubstr("MIN 3 is above MAX 2"));
}

}  // namespace
}  // namespace dtrain::elastic
