#include "services/launcher/restart_policy.h"

#include <signal.h>

#include <gtest/gtest.h>

namespace dtrain::launcher {
namespace {

ChildExit Killed(int sig, bool restartable = true) { return ChildExit{restartable, sig, 0}; }
ChildExit Exited(int status, bool restartable = true) { return ChildExit{restartable, 0, status}; }

TEST(RestartPolicyTest, ZeroRestartsKeepsTodaysBehaviour) {
  const RestartDecision d = DecideRestart(RestartPolicy{}, Killed(SIGKILL), 0);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why_not, "");  // the failure message stays as it was
}

TEST(RestartPolicyTest, SuccessIsNeverRestarted) {
  EXPECT_FALSE(DecideRestart(RestartPolicy{3}, Exited(0), 0).restart);
}

TEST(RestartPolicyTest, FailureRestartsExitsAndSignalsUpToTheBudget) {
  const RestartPolicy p{2, RestartOn::kFailure, absl::Seconds(1)};
  EXPECT_TRUE(DecideRestart(p, Exited(3), 0).restart);
  EXPECT_TRUE(DecideRestart(p, Killed(SIGSEGV), 1).restart);
  const RestartDecision past = DecideRestart(p, Killed(SIGKILL), 2);
  EXPECT_FALSE(past.restart);
  EXPECT_EQ(past.why_not, " after 2 restarts (--max-restarts 2)");
  EXPECT_EQ(DecideRestart(RestartPolicy{1}, Exited(1), 1).why_not, " after 1 restart (--max-restarts 1)");
}

TEST(RestartPolicyTest, SignalRestartsOnlyDeathsBySignal) {
  const RestartPolicy p{3, RestartOn::kSignal, absl::Seconds(1)};
  EXPECT_TRUE(DecideRestart(p, Killed(SIGKILL), 0).restart);
  const RestartDecision d = DecideRestart(p, Exited(1), 0);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.why_not, ", not restarted (--restart-on signal: only a death by a signal is)");
}

TEST(RestartPolicyTest, ServersAreNotRestarted) {
  const RestartDecision d = DecideRestart(RestartPolicy{3}, Killed(SIGKILL, /*restartable=*/false), 0);
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.why_not.find("a server is not restarted yet"), std::string::npos) << d.why_not;
}

TEST(RestartPolicyTest, BackoffDoublesUpToTheCap) {
  const RestartPolicy p{100, RestartOn::kFailure, absl::Milliseconds(500)};
  EXPECT_EQ(DecideRestart(p, Killed(SIGKILL), 0).delay, absl::Milliseconds(500));
  EXPECT_EQ(DecideRestart(p, Killed(SIGKILL), 1).delay, absl::Seconds(1));
  EXPECT_EQ(DecideRestart(p, Killed(SIGKILL), 3).delay, absl::Seconds(4));
  EXPECT_EQ(DecideRestart(p, Killed(SIGKILL), 60).delay, kMaxRestartBackoff);
  EXPECT_EQ(DecideRestart(RestartPolicy{1, RestartOn::kFailure, absl::ZeroDuration()}, Killed(9), 0).delay,
            absl::ZeroDuration());
}

TEST(RestartPolicyTest, ParsesRestartOn) {
  EXPECT_EQ(*ParseRestartOn("failure"), RestartOn::kFailure);
  EXPECT_EQ(*ParseRestartOn("signal"), RestartOn::kSignal);
  EXPECT_FALSE(ParseRestartOn("always").ok());
  EXPECT_EQ(RestartOnName(RestartOn::kSignal), "signal");
}

}  // namespace
}  // namespace dtrain::launcher
