#include "common/elastic/membership_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dtrain::elastic {
namespace {

using ::testing::HasSubstr;

Membership TwoToFour() {
  Membership m;
  m.schedule = *MembershipSchedule::Create(2, 4, {{0, {0, 1}}, {180, {0, 1, 2}}});
  m.lr = ElasticLr::kKeep;
  m.workers_at_start = 2;
  return m;
}

TEST(MembershipProtoTest, RoundTripsTheScheduleBoundsAndLrRule) {
  const Membership m = TwoToFour();
  auto back = MembershipFromProto(MembershipToProto(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->schedule, m.schedule);
  EXPECT_EQ(back->lr, ElasticLr::kKeep);
  EXPECT_EQ(back->workers_at_start, 2);
}

TEST(MembershipProtoTest, LrFactorScalesWithTheGenerationsWorkers) {
  Membership m = TwoToFour();
  m.lr = ElasticLr::kScale;
  EXPECT_DOUBLE_EQ(m.LrFactor(0), 1.0);
  EXPECT_DOUBLE_EQ(m.LrFactor(1), 1.5);
  m.lr = ElasticLr::kKeep;
  EXPECT_DOUBLE_EQ(m.LrFactor(1), 1.0);
}

TEST(MembershipProtoTest, RefusesAGenerationWithMoreRanksThanMaxBeforeCopyingThem) {
  v1::MembershipState s = MembershipToProto(TwoToFour());
  for (int r = 0; r < 5; ++r) s.mutable_generations(1)->add_ranks(r);
  auto back = MembershipFromProto(s);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("above the job's MAX 4"));
}

TEST(MembershipProtoTest, RefusesScheduleRuleBreaksAndBadFields) {
  v1::MembershipState s = MembershipToProto(TwoToFour());
  s.mutable_generations(1)->set_from_step(0);
  EXPECT_FALSE(MembershipFromProto(s).ok());

  s = MembershipToProto(TwoToFour());
  s.set_lr("double");
  EXPECT_THAT(MembershipFromProto(s).status().message(), HasSubstr("lr"));

  s = MembershipToProto(TwoToFour());
  s.set_workers_at_start(9);
  EXPECT_THAT(MembershipFromProto(s).status().message(), HasSubstr("workers_at_start 9"));

  s = MembershipToProto(TwoToFour());
  s.set_max_workers(0);
  EXPECT_FALSE(MembershipFromProto(s).ok());

  s.Clear();
  s.set_max_workers(2);
  s.set_min_workers(1);
  EXPECT_THAT(MembershipFromProto(s).status().message(), HasSubstr("no generation"));
}

}  // namespace
}  // namespace dtrain::elastic
