// The Supervisor in an elastic job (SupervisorOptions::workers_may_leave): a worker's
// exit 0 while the job goes on is a leave, announced and not restarted, and the job
// ends when the scheduler ends it. The children are small shell scripts that wait on
// marker files, so each case runs in milliseconds.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/launcher/supervisor.h"

namespace dtrain::launcher {
namespace {

class SupervisorElasticTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/supervisor-XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    messages_fd_ = ::open((dir_ + "/messages").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    output_fd_ = ::open((dir_ + "/output").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(messages_fd_, 0);
    ASSERT_GE(output_fd_, 0);
  }
  void TearDown() override {
    ::close(messages_fd_);
    ::close(output_fd_);
    std::filesystem::remove_all(dir_);
  }

  SupervisorOptions Options() const {
    SupervisorOptions options;
    options.message_fd = messages_fd_;
    options.output_fd = output_fd_;
    options.finish_grace = absl::ZeroDuration();  // a job end by the workers would stop the scheduler at once
    options.workers_may_leave = true;
    options.restart = RestartPolicy{3, RestartOn::kFailure, absl::ZeroDuration()};
    return options;
  }

  // A child running `script` in sh, in the test's directory.
  ChildSpec Sh(const std::string& name, const std::string& script) const {
    return ChildSpec{name, "/bin/sh", {"-c", absl::StrCat("cd '", dir_, "' && ", script)}, {}};
  }

  std::string Messages() const {
    std::ifstream in(dir_ + "/messages");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  void Touch(const std::string& name) const { std::ofstream(dir_ + "/" + name) << "\n"; }
  bool Exists(const std::string& name) const { return std::filesystem::exists(dir_ + "/" + name); }

  std::string dir_;
  int messages_fd_ = -1;
  int output_fd_ = -1;
};

// Waits for `name` to appear (bounded: the test fails rather than hangs).
std::string WaitFor(const std::string& name, const std::string& then) {
  return absl::StrCat("i=0; while [ ! -e ", name, " ]; do i=$((i+1)); [ $i -gt 2000 ] && exit 9; sleep 0.005; done; ",
                      then);
}

TEST_F(SupervisorElasticTest, AWorkersExitZeroWhileTheJobGoesOnIsALeaveNotRestarted) {
  SupervisorOptions options = Options();
  options.leave_notice_after = absl::ZeroDuration();
  Supervisor sup(options);
  ASSERT_TRUE(sup.Start(Role::kScheduler, Sh("scheduler", WaitFor("end", "exit 0"))).ok());
  ASSERT_TRUE(sup.Start(Role::kWorker, Sh("worker 0", WaitFor("end", "exit 0"))).ok());
  ASSERT_TRUE(sup.Start(Role::kWorker, Sh("worker 1", "exit 0")).ok());
  sup.AllowRestarts();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Messages().find("worker 1 left") == std::string::npos && absl::Now() < deadline) {
    sup.Pump(absl::Milliseconds(20));
  }
  EXPECT_NE(Messages().find("dtrain launch: worker 1 left (exit 0); not restarted\n"), std::string::npos) << Messages();
  EXPECT_EQ(sup.Restarts(Role::kWorker, 1), 0);
  EXPECT_FALSE(sup.Find(Role::kScheduler, 0)->exited());
  Touch("end");
  EXPECT_EQ(sup.Run(), 0) << Messages();
  EXPECT_EQ(sup.Find(Role::kScheduler, 0)->exit_status(), 0);
  EXPECT_EQ(sup.Restarts(Role::kWorker, 1), 0);
}

TEST_F(SupervisorElasticTest, TheJobEndsWhenTheSchedulerEndsItNotWhenItsWorkersAreGone) {
  // Both workers exit 0; the scheduler goes on (workers started elsewhere may still
  // train) until it ends the job itself. Without workers_may_leave, finish_grace 0
  // would have stopped it as soon as the workers were gone.
  Supervisor sup(Options());
  ASSERT_TRUE(sup.Start(Role::kScheduler,
                        Sh("scheduler", WaitFor("w0", WaitFor("w1", "sleep 0.2; touch scheduler-done; exit 0"))))
                  .ok());
  ASSERT_TRUE(sup.Start(Role::kWorker, Sh("worker 0", "touch w0; exit 0")).ok());
  ASSERT_TRUE(sup.Start(Role::kWorker, Sh("worker 1", "touch w1; exit 0")).ok());
  sup.AllowRestarts();
  EXPECT_EQ(sup.Run(), 0) << Messages();
  EXPECT_TRUE(Exists("scheduler-done")) << Messages();
  EXPECT_EQ(Messages().find("still runs"), std::string::npos) << Messages();
  // They finished with the job (it ended within leave_notice_after): no leave.
  EXPECT_EQ(Messages().find(" left "), std::string::npos) << Messages();
}

TEST_F(SupervisorElasticTest, WithoutElasticTheWorkersEndTheJob) {
  SupervisorOptions options = Options();
  options.workers_may_leave = false;
  Supervisor sup(options);
  ASSERT_TRUE(sup.Start(Role::kScheduler, Sh("scheduler", WaitFor("never", "exit 0"))).ok());
  ASSERT_TRUE(sup.Start(Role::kWorker, Sh("worker 0", "exit 0")).ok());
  EXPECT_EQ(sup.Run(), 0) << Messages();
  EXPECT_NE(Messages().find("scheduler still runs 0 after the workers finished; stopping it"), std::string::npos)
      << Messages();
  EXPECT_EQ(Messages().find(" left "), std::string::npos) << Messages();
}

}  // namespace
}  // namespace dtrain::launcher
