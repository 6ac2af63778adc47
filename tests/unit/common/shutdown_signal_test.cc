// ShutdownSignal turns SIGTERM / SIGINT into a reason, whichever thread the kernel hands
// the signal to: here a thread started before it (as a library's pool starts while it
// is loaded, before main) that has them unblocked.
#include "common/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"

namespace dtrain {
namespace {

// A thread with SIGTERM and SIGINT unblocked, idle until told to stop.
class UnblockedThread {
 public:
  UnblockedThread()
      : thread_([this] {
          sigset_t s;
          sigemptyset(&s);
          sigaddset(&s, SIGTERM);
          sigaddset(&s, SIGINT);
          pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
          started_.store(true);
          while (!stop_.load()) usleep(1000);
        }) {
    while (!started_.load()) usleep(100);
  }
  ~UnblockedThread() {
    stop_.store(true);
    thread_.join();
  }
  pthread_t handle() { return thread_.native_handle(); }

 private:
  std::atomic<bool> started_{false}, stop_{false};
  std::thread thread_;
};

TEST(ShutdownSignalTest, SignalToAThreadStartedBeforeItBecomesTheReason) {
  UnblockedThread early;  // started first, so it never inherits the blocked mask
  ShutdownSignal shutdown;
  // Straight to that thread: with only a blocked mask, the default action would end
  // this test's process here.
  ASSERT_EQ(pthread_kill(early.handle(), SIGTERM), 0);
  EXPECT_EQ(shutdown.WaitFor(absl::Seconds(10)), "SIGTERM");
}

TEST(ShutdownSignalTest, SignalToTheProcessBecomesTheReasonAndTheFirstOneStays) {
  UnblockedThread early;
  ShutdownSignal shutdown;
  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  EXPECT_EQ(shutdown.WaitFor(absl::Seconds(10)), "SIGINT");
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(shutdown.WaitFor(absl::ZeroDuration()), "SIGINT");
}

TEST(ShutdownSignalTest, ARequestedReasonComesBackAndNoSignalMeansNone) {
  ShutdownSignal shutdown;
  EXPECT_EQ(shutdown.WaitFor(absl::Milliseconds(50)), "");
  shutdown.Request("job finished");
  shutdown.Request("later reason");
  EXPECT_EQ(shutdown.Wait(), "job finished");
}

// A signal before the guarded call began must not wait out that call: turning the exit
// on ends the process then, with status 0 and the log line naming the signal.
TEST(ShutdownSignalDeathTest, ExitTurnedOnAfterASignalCameEndsTheProcessAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ShutdownSignal shutdown;
        kill(getpid(), SIGTERM);
        if (shutdown.WaitFor(absl::Seconds(10)) != "SIGTERM") std::_Exit(3);
        shutdown.set_exit_on_signal(true, "before registration finished");
        std::_Exit(4);  // not reached when the exit works
      },
      ::testing::ExitedWithCode(0), "stopping \\(SIGTERM\\) before registration finished");
}

TEST(ShutdownSignalTest, ARequestedReasonDoesNotMakeTheExitFire) {
  ShutdownSignal shutdown;
  shutdown.Request("job finished");
  shutdown.set_exit_on_signal(true, "guarded");
  shutdown.set_exit_on_signal(false);
  EXPECT_EQ(shutdown.Wait(), "job finished");
}

}  // namespace
}  // namespace dtrain
