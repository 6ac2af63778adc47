// Role: one enum, its names (common/role.h), and the wire's v1::Role both ways
// (common/role_wire.h).
#include "common/role_wire.h"

#include "gtest/gtest.h"

namespace dtrain {
namespace {

TEST(RoleTest, NamesAndProtoRoundTrip) {
  for (Role r : {Role::kScheduler, Role::kServer, Role::kWorker}) {
    EXPECT_EQ(ParseRole(RoleName(r)).value(), r) << RoleName(r);
    EXPECT_EQ(RoleFromProto(ToProto(r)).value(), r) << RoleName(r);
  }
  EXPECT_STREQ(RoleName(Role::kServer), "server");
  EXPECT_EQ(ToProto(Role::kScheduler), v1::ROLE_SCHEDULER);
  EXPECT_EQ(ToProto(Role::kServer), v1::ROLE_SERVER);
  EXPECT_EQ(ToProto(Role::kWorker), v1::ROLE_WORKER);
}

TEST(RoleTest, UnknownNamesAndUnspecifiedRolesAreRefused) {
  const absl::StatusOr<Role> ps = ParseRole("ps");
  EXPECT_EQ(ps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ps.status().message(), "unknown role 'ps' (known: scheduler, server, worker)");
  // Exactly the three names: no case folding, no prefixes, nothing for the empty text.
  EXPECT_EQ(ParseRole("Worker").status().message(), "unknown role 'Worker' (known: scheduler, server, worker)");
  EXPECT_FALSE(ParseRole("work").ok());
  EXPECT_EQ(ParseRole("").status().message(), "unknown role '' (known: scheduler, server, worker)");
  EXPECT_EQ(RoleFromProto(v1::ROLE_UNSPECIFIED).status().message(), "no role: ROLE_UNSPECIFIED");
  EXPECT_EQ(RoleFromProto(static_cast<v1::Role>(9)).status().message(), "no role: value 9");
}

}  // namespace
}  // namespace dtrain
