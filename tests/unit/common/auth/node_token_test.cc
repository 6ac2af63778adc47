#include "common/auth/node_token.h"

#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace dtrain::auth {
namespace {

const std::string kKey = DeriveTokenKey("-----BEGIN PRIVATE KEY-----\nscheduler\n-----END PRIVATE KEY-----\n");

TEST(NodeTokenTest, AMintedTokenVerifiesToItsClaims) {
  const TokenClaims claims{Role::kWorker, 1, 2};
  const std::string token = MintToken(kKey, claims);
  EXPECT_EQ(token.rfind("worker.1.2.", 0), 0u) << token;
  absl::StatusOr<TokenClaims> got = VerifyToken(kKey, token);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, claims);
  EXPECT_EQ(Describe(*got), "worker 1 incarnation 2");
}

TEST(NodeTokenTest, TheTokenTextSpellsTheRoleByName) {
  for (const TokenClaims& claims : {TokenClaims{Role::kServer, 0, 1}, TokenClaims{Role::kWorker, 3, 7}}) {
    const std::string token = MintToken(kKey, claims);
    const std::string prefix = claims.role == Role::kServer ? "server.0.1." : "worker.3.7.";
    EXPECT_EQ(token.rfind(prefix, 0), 0u) << token;
    EXPECT_EQ(VerifyToken(kKey, token).value(), claims);
  }
  // The scheduler registers nothing, so no token names it, even one with a valid MAC.
  const std::string scheduler_token = MintToken(kKey, {Role::kScheduler, 0, 1});
  EXPECT_EQ(scheduler_token.rfind("scheduler.0.1.", 0), 0u) << scheduler_token;
  EXPECT_EQ(VerifyToken(kKey, scheduler_token).status().message(), "node token not well formed");
}

TEST(NodeTokenTest, TheKeyIsStableAndDependsOnThePrivateKey) {
  EXPECT_EQ(kKey.size(), 32u);
  EXPECT_EQ(DeriveTokenKey("-----BEGIN PRIVATE KEY-----\nscheduler\n-----END PRIVATE KEY-----\n"), kKey)
      << "a restarted scheduler with the same certificate must accept the tokens it issued";
  EXPECT_NE(DeriveTokenKey("another key"), kKey);
  EXPECT_EQ(kKey.find("scheduler"), std::string::npos);
}

TEST(NodeTokenTest, ChangedClaimsOrAnotherKeyAreRefused) {
  const std::string token = MintToken(kKey, {Role::kWorker, 1, 2});
  const std::string mac = token.substr(token.rfind('.') + 1);
  // Another rank, incarnation or role with the same MAC: the claims are what is signed.
  for (const std::string& forged :
       {"worker.0.2." + mac, "worker.1.3." + mac, "server.1.2." + mac, "worker.01.2." + mac, "worker.1.02." + mac}) {
    absl::StatusOr<TokenClaims> got = VerifyToken(kKey, forged);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated) << forged;
  }
  EXPECT_EQ(VerifyToken(DeriveTokenKey("another job's scheduler"), token).status().message(),
            "node token not issued by this job's scheduler");
  EXPECT_FALSE(VerifyToken("", token).ok()) << "no key (a server not yet registered) verifies nothing";
  std::string flipped = token;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(VerifyToken(kKey, flipped).ok());
}

TEST(NodeTokenTest, MalformedTokensAreRefusedWithoutEchoingThem) {
  for (const std::string& bad :
       {std::string(), std::string("worker"), std::string("worker.1.2"),
        std::string("worker.-1.2.") + std::string(64, 'a'), std::string("scheduler.0.1.") + std::string(64, 'a'),
        std::string("worker.1.2.") + std::string(64, 'A'), std::string("worker.1.2.") + std::string(63, 'a'),
        std::string("worker.1.2.3.") + std::string(64, 'a'), std::string(100000, '.')}) {
    absl::StatusOr<TokenClaims> got = VerifyToken(kKey, bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated);
    if (bad.size() > 8) EXPECT_EQ(std::string(got.status().message()).find(bad), std::string::npos);
  }
}

TEST(NodeTokenTest, TheKeyringWaitsForItsKeyUntilTheDeadline) {
  TokenKeyring ring;
  const absl::Time start = absl::Now();
  EXPECT_EQ(ring.Get(start + absl::Milliseconds(100)), "");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  std::thread later([&ring] {
    absl::SleepFor(absl::Milliseconds(50));
    ring.Set(kKey);
  });
  EXPECT_EQ(ring.Get(absl::Now() + absl::Seconds(30)), kKey);
  later.join();
}

}  // namespace
}  // namespace dtrain::auth
