// The launcher's elastic settings: parsed from the command line only, checked against
// the job before anything starts, and handed on (DTRAIN_ELASTIC to every child, the
// scheduler's own flags to it alone, the command that adds a worker).
#include "services/launcher/launch_elastic.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace dtrain::launcher {
namespace {

// Parses `args` into a fresh LaunchElastic; the environment is empty except `env`.
absl::Status Parse(const std::vector<std::string>& args, LaunchElastic* out, const char* env = nullptr) {
  FlagSet flags("test", "");
  flags.set_env_lookup(
      [env](const char* name) -> const char* { return std::string(name) == "DTRAIN_ELASTIC" ? env : nullptr; });
  AddLaunchElasticFlags(flags, out);
  return flags.Parse(args);
}

TEST(LaunchElasticTest, BoundsComeFromTheCommandLineOnly) {
  LaunchElastic e;
  ASSERT_TRUE(Parse({}, &e, "2:4").ok());
  EXPECT_FALSE(e.spec.enabled());
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &e).ok());
  EXPECT_EQ(e.spec.min_workers, 2);
  EXPECT_EQ(e.spec.max_workers, 4);
  EXPECT_FALSE(e.lr_given);
}

TEST(LaunchElasticTest, BadBoundsNameTheFlag) {
  LaunchElastic e;
  const absl::Status s = Parse({"--elastic", "3:2"}, &e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--elastic 3:2: MIN 3 is above MAX 2"), std::string::npos) << s;
  EXPECT_FALSE(Parse({"--elastic-lr", "double"}, &e).ok());
}

TEST(LaunchElasticTest, TheJobMustFitTheBounds) {
  LaunchElastic e;
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &e).ok());
  EXPECT_TRUE(CheckLaunchElastic(e, 2, KVStoreMode::kDistSync).ok());
  EXPECT_TRUE(CheckLaunchElastic(e, 4, KVStoreMode::kDistSync).ok());
  const absl::Status above = CheckLaunchElastic(e, 5, KVStoreMode::kDistSync);
  EXPECT_NE(above.message().find("--num-workers 5 is above --elastic 2:4's MAX 4"), std::string::npos) << above;
  EXPECT_FALSE(CheckLaunchElastic(e, 1, KVStoreMode::kDistSync).ok());
  EXPECT_FALSE(CheckLaunchElastic(e, 2, KVStoreMode::kDistAsync).ok());
}

TEST(LaunchElasticTest, TheSchedulersFlagsNeedElastic) {
  LaunchElastic e;
  ASSERT_TRUE(Parse({"--elastic-lr", "scale"}, &e).ok());
  EXPECT_TRUE(e.lr_given);
  EXPECT_EQ(CheckLaunchElastic(e, 2, KVStoreMode::kDistSync).message(), "--elastic-lr needs --elastic MIN:MAX");
  LaunchElastic r;
  ASSERT_TRUE(Parse({"--replay-membership", "x.json"}, &r).ok());
  EXPECT_EQ(CheckLaunchElastic(r, 2, KVStoreMode::kDistSync).message(), "--replay-membership needs --elastic MIN:MAX");
}

class ReplayFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/launch-elastic-XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The job `--elastic 2:4 -n 2 --replay-membership FILE`, FILE holding `text`.
  absl::Status Check(const std::string& text, int64_t num_workers = 2) {
    const std::string path = dir_ + "/membership.json";
    std::ofstream(path) << text;
    LaunchElastic e;
    EXPECT_TRUE(Parse({"--elastic", "2:4", "--replay-membership", path}, &e).ok());
    return CheckLaunchElastic(e, num_workers, KVStoreMode::kDistSync);
  }

  std::string dir_;
};

constexpr char kRecorded[] =
    R"({"format": "dtrain-membership-1", "min_workers": 2, "max_workers": 4,
 "generations": [{"from_step": 0, "workers": [0, 1]}, {"from_step": 180, "workers": [0, 1, 2]}]})";

TEST_F(ReplayFileTest, ARecordingOfThisJobIsAccepted) { EXPECT_TRUE(Check(kRecorded).ok()); }

TEST_F(ReplayFileTest, AFileThatDoesNotParseIsRefusedNamingTheFlagAndWhere) {
  const absl::Status s = Check("{\"format\": \"dtrain-membership-1\",\n oops}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--replay-membership: "), std::string::npos) << s;
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s;
}

TEST_F(ReplayFileTest, AMissingFileIsRefused) {
  LaunchElastic e;
  ASSERT_TRUE(Parse({"--elastic", "2:4", "--replay-membership", dir_ + "/none.json"}, &e).ok());
  const absl::Status s = CheckLaunchElastic(e, 2, KVStoreMode::kDistSync);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--replay-membership: "), std::string::npos) << s;
  EXPECT_NE(s.message().find(dir_ + "/none.json"), std::string::npos) << s;
}

TEST_F(ReplayFileTest, ARecordingOfAnotherShapeIsRefused) {
  const absl::Status start = Check(kRecorded, 3);
  EXPECT_NE(start.message().find("the recorded job started with workers {0,1}, this one with -n 3"), std::string::npos)
      << start;
  const absl::Status bounds = Check(
      R"({"format": "dtrain-membership-1", "min_workers": 1, "max_workers": 4,
          "generations": [{"from_step": 0, "workers": [0, 1]}]})");
  EXPECT_NE(bounds.message().find("the recorded job was --elastic 1:4, this one is --elastic 2:4"), std::string::npos)
      << bounds;
}

// --load-epoch E with --model-prefix P among the worker flags: P-000E.membership.json
// goes to the scheduler, and -n must be its worker count.
TEST_F(ReplayFileTest, AResumeTakesTheCheckpointsMembershipAndItsWorkerCount) {
  std::ofstream(dir_ + "/m-0002.membership.json") << kRecorded;  // ends with 3 workers
  const std::vector<std::string> worker = {"--network", "lenet", "--model-prefix", dir_ + "/m", "--load-epoch=2"};
  LaunchElastic e;
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &e).ok());
  ASSERT_TRUE(ResolveElasticResume(worker, 3, &e).ok());
  EXPECT_EQ(e.spec.resume_membership, dir_ + "/m-0002.membership.json");
  const std::vector<std::string> args = SchedulerElasticArgs(e);
  EXPECT_EQ(args, (std::vector<std::string>{"--resume-membership", dir_ + "/m-0002.membership.json"}));
  EXPECT_TRUE(CheckLaunchElastic(e, 3, KVStoreMode::kDistSync).ok());

  LaunchElastic two;
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &two).ok());
  const absl::Status n = ResolveElasticResume(worker, 2, &two);
  EXPECT_EQ(n.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(n.message().find("checkpoint 2 resumes with 3 workers"), std::string::npos) << n;
  EXPECT_NE(n.message().find("start it with -n 3"), std::string::npos) << n;

  LaunchElastic missing;
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &missing).ok());
  const absl::Status none = ResolveElasticResume({"--model-prefix", dir_ + "/m", "--load-epoch", "1"}, 3, &missing);
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find(dir_ + "/m-0001.membership.json"), std::string::npos) << none;

  // A fresh start, or a job that is not elastic: nothing to find.
  LaunchElastic fresh;
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &fresh).ok());
  EXPECT_TRUE(ResolveElasticResume({"--model-prefix", dir_ + "/m"}, 2, &fresh).ok());
  EXPECT_TRUE(fresh.spec.resume_membership.empty());
  LaunchElastic fixed;
  EXPECT_TRUE(ResolveElasticResume(worker, 2, &fixed).ok());
  EXPECT_TRUE(fixed.spec.resume_membership.empty());
}

TEST(LaunchElasticTest, EveryChildIsToldTheBoundsAndOnlyTheSchedulerTheRest) {
  LaunchElastic off;
  EXPECT_EQ(ElasticEnv(off.spec), (std::pair<std::string, std::string>{"DTRAIN_ELASTIC", ""}));
  EXPECT_TRUE(SchedulerElasticArgs(off).empty());

  LaunchElastic on;
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &on).ok());
  EXPECT_EQ(ElasticEnv(on.spec), (std::pair<std::string, std::string>{"DTRAIN_ELASTIC", "2:4"}));
  EXPECT_TRUE(SchedulerElasticArgs(on).empty());  // the scheduler's default lr rule, unsaid
  ASSERT_TRUE(Parse({"--elastic-lr", "keep", "--replay-membership", "run-membership.json"}, &on).ok());
  EXPECT_EQ(SchedulerElasticArgs(on),
            (std::vector<std::string>{"--elastic-lr", "keep", "--replay-membership", "run-membership.json"}));
}

TEST(LaunchElasticTest, TheJoinCommandCarriesWhatAWorkerMustAgreeOnAndNoRank) {
  const std::vector<std::pair<std::string, std::string>> env = {{"DTRAIN_NUM_WORKERS", "2"},
                                                                {"DTRAIN_NUM_SERVERS", "1"},
                                                                {"DTRAIN_REPLICATION", "1"},
                                                                {"DTRAIN_NODE_HOST", "127.0.0.1"},
                                                                {"DTRAIN_LOG_IDENTITY", "0"},
                                                                {"DTRAIN_JOB_ID", "job-1"},
                                                                {"DTRAIN_ELASTIC", "2:4"},
                                                                {"DTRAIN_SCHEDULER_ADDR", "127.0.0.1:9091"},
                                                                {"DTRAIN_RANK", "1"},
                                                                {"DTRAIN_LOCAL_WORKERS", "2"},
                                                                {"DTRAIN_BIND_HOST", "127.0.0.1"}};
  EXPECT_EQ(JoinCommand(env, "/opt/dtrain bin/dtrain-worker", KVStoreMode::kDistSync,
                        {"--network", "lenet", "--model-prefix", "it's"}),
            "DTRAIN_SCHEDULER_ADDR=127.0.0.1:9091 DTRAIN_NUM_WORKERS=2 DTRAIN_NUM_SERVERS=1 DTRAIN_REPLICATION=1 "
            "DTRAIN_JOB_ID=job-1 DTRAIN_ELASTIC=2:4 DTRAIN_LOCAL_WORKERS=2 DTRAIN_NODE_HOST=127.0.0.1 "
            "'/opt/dtrain bin/dtrain-worker' "
            "--kv-store dist_sync --network lenet --model-prefix 'it'\\''s'");
}

}  // namespace
}  // namespace dtrain::launcher

namespace dtrain::launcher {
namespace {

TEST(LaunchElasticTest, JoinInstructionsOnlyForAnElasticJobAndWithTlsNameTheRanksCertificate) {
  const std::vector<std::pair<std::string, std::string>> env = {{"DTRAIN_SCHEDULER_ADDR", "127.0.0.1:9"}};
  LaunchElastic off;
  EXPECT_TRUE(JoinInstructions(off.spec, env, "w", KVStoreMode::kDistSync, {}, "/t/tls").empty());
  LaunchElastic on;
  ASSERT_TRUE(Parse({"--elastic", "2:4"}, &on).ok());
  const std::vector<std::string> plain = JoinInstructions(on.spec, env, "w", KVStoreMode::kDistSync, {}, "");
  EXPECT_EQ(plain,
            std::vector<std::string>{"to add a worker while it runs: DTRAIN_SCHEDULER_ADDR=127.0.0.1:9 w --kv-store "
                                     "dist_sync"});
  const std::vector<std::string> tls = JoinInstructions(on.spec, env, "w", KVStoreMode::kDistSync, {}, "/t/tls");
  ASSERT_EQ(tls.size(), 2u);
  EXPECT_EQ(tls[1],
            "with --tls, add for a free rank K below 4: DTRAIN_RANK=K DTRAIN_TLS_CA=/t/tls/ca.crt "
            "DTRAIN_TLS_CERT=/t/tls/worker-K.crt DTRAIN_TLS_KEY=/t/tls/worker-K.key");
}

}  // namespace
}  // namespace dtrain::launcher
