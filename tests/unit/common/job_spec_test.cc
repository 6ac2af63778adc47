// The job's settings: one binding per program (which flags, which environment names),
// the defaults, and checks that name the flag and the value.
#include "common/job_spec.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dtrain {
namespace {

struct Parsed {
  absl::Status status;
  std::string usage;
};

// Declares `which` on `spec`, parses `args` with `env` as the environment, then checks.
Parsed Parse(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, JobSpec* spec,
             const JobSpecFlags& which) {
  FlagSet flags("test", "");
  AddJobSpecFlags(flags, spec, which);
  auto held = std::make_shared<std::map<std::string, std::string>>(env);
  flags.set_env_lookup([held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  });
  absl::Status s = flags.Parse(args);
  if (s.ok()) s = CheckJobSpec(*spec, which);
  return {s, flags.Usage()};
}

TEST(JobSpecTest, DefaultsAreTheNamedConstants) {
  const JobSpec spec;
  EXPECT_EQ(spec.num_workers, 1);
  EXPECT_EQ(spec.num_servers, 1);
  EXPECT_EQ(spec.replication, 1);
  EXPECT_EQ(spec.mode, kDefaultJobMode);
  EXPECT_EQ(spec.mode, KVStoreMode::kDistSync);
  EXPECT_EQ(spec.staleness, 0);
  EXPECT_EQ(spec.job_id, "");
  EXPECT_DOUBLE_EQ(spec.register_timeout_s, kDefaultRegisterTimeoutSeconds);
  EXPECT_DOUBLE_EQ(spec.sync_timeout_s, kDefaultSyncTimeoutSeconds);
  EXPECT_DOUBLE_EQ(spec.rejoin_timeout_s, 0);
  EXPECT_TRUE(CheckJobSpec(spec, NodeJobSpecFlags(Role::kWorker)).ok());
}

TEST(JobSpecTest, EachRoleDeclaresItsOwnSettings) {
  auto declared = [](const JobSpecFlags& which) {
    JobSpec spec;
    return Parse({}, {}, &spec, which).usage;
  };
  const std::string scheduler = declared(NodeJobSpecFlags(Role::kScheduler));
  const std::string server = declared(NodeJobSpecFlags(Role::kServer));
  const std::string worker = declared(NodeJobSpecFlags(Role::kWorker));
  const std::string launch = declared(LaunchJobSpecFlags());
  for (const std::string* usage : {&scheduler, &server, &worker, &launch}) {
    for (const char* flag : {"--num-workers", "--num-servers", "--replication", "--job-id"}) {
      EXPECT_NE(usage->find(flag), std::string::npos) << flag << " in\n" << *usage;
    }
  }
  EXPECT_NE(scheduler.find("--kv-store (default: 'dist_sync') [env: DTRAIN_KV_STORE]"), std::string::npos) << scheduler;
  EXPECT_EQ(scheduler.find("--sync-timeout"), std::string::npos) << "the scheduler has no step deadline";
  EXPECT_EQ(server.find("--kv-store"), std::string::npos) << "worker 0 configures the servers' mode";
  EXPECT_NE(server.find("--sync-timeout"), std::string::npos);
  EXPECT_NE(worker.find("--staleness"), std::string::npos);
  EXPECT_NE(worker.find("--num-workers (default: '1') [env: DTRAIN_NUM_WORKERS DMLC_NUM_WORKER]"), std::string::npos)
      << worker;
  // The launcher reads only DTRAIN_JOB_ID and DTRAIN_REJOIN_TIMEOUT from its environment.
  EXPECT_NE(launch.find("--job-id (default: '') [env: DTRAIN_JOB_ID]"), std::string::npos) << launch;
  EXPECT_NE(launch.find("--rejoin-timeout (default: '0') [env: DTRAIN_REJOIN_TIMEOUT]"), std::string::npos) << launch;
  EXPECT_EQ(launch.find("DTRAIN_NUM_WORKERS"), std::string::npos) << launch;
  EXPECT_EQ(launch.find("--register-timeout"), std::string::npos) << launch;
}

TEST(JobSpecTest, EnvironmentFallsBackAndTheCommandLineWins) {
  const std::map<std::string, std::string> env = {
      {"DMLC_NUM_WORKER", "4"},         {"DMLC_NUM_SERVER", "3"},     {"DTRAIN_REPLICATION", "2"},
      {"DTRAIN_KV_STORE", "dist_ssp"},  {"DTRAIN_STALENESS", "5"},    {"DTRAIN_JOB_ID", "job-env"},
      {"DTRAIN_REGISTER_TIMEOUT", "7"}, {"DTRAIN_SYNC_TIMEOUT", "9"}, {"DTRAIN_REJOIN_TIMEOUT", "11"}};
  JobSpec from_env;
  ASSERT_TRUE(Parse({}, env, &from_env, NodeJobSpecFlags(Role::kWorker)).status.ok());
  EXPECT_EQ(from_env.num_workers, 4);
  EXPECT_EQ(from_env.num_servers, 3);
  EXPECT_EQ(from_env.replication, 2);
  EXPECT_EQ(from_env.mode, KVStoreMode::kDistSsp);
  EXPECT_EQ(from_env.staleness, 5);
  EXPECT_EQ(from_env.job_id, "job-env");
  EXPECT_DOUBLE_EQ(from_env.register_timeout_s, 7);
  EXPECT_DOUBLE_EQ(from_env.sync_timeout_s, 9);
  EXPECT_DOUBLE_EQ(from_env.rejoin_timeout_s, 11);

  JobSpec flags_win;
  ASSERT_TRUE(Parse({"--num-workers", "2", "--kv-store", "dist_async", "--staleness", "0", "--job-id", "job-cli"}, env,
                    &flags_win, NodeJobSpecFlags(Role::kWorker))
                  .status.ok());
  EXPECT_EQ(flags_win.num_workers, 2);
  EXPECT_EQ(flags_win.mode, KVStoreMode::kDistAsync);
  EXPECT_EQ(flags_win.job_id, "job-cli");

  // dtrain's own name beats ps-lite's.
  JobSpec dtrain_name;
  ASSERT_TRUE(Parse({}, {{"DTRAIN_NUM_WORKERS", "6"}, {"DMLC_NUM_WORKER", "4"}}, &dtrain_name,
                    NodeJobSpecFlags(Role::kScheduler))
                  .status.ok());
  EXPECT_EQ(dtrain_name.num_workers, 6);
}

TEST(JobSpecTest, TheLauncherIgnoresTheJobsEnvironmentButItsId) {
  JobSpec launch;
  launch.num_workers = 0;
  ASSERT_TRUE(Parse({"--num-workers", "2"},
                    {{"DTRAIN_NUM_WORKERS", "5"},
                     {"DTRAIN_KV_STORE", "dist_async"},
                     {"DTRAIN_JOB_ID", "job-l"},
                     {"DTRAIN_REJOIN_TIMEOUT", "30"}},
                    &launch, LaunchJobSpecFlags())
                  .status.ok());
  EXPECT_EQ(launch.num_workers, 2);
  EXPECT_EQ(launch.mode, KVStoreMode::kDistSync);
  EXPECT_EQ(launch.job_id, "job-l");
  EXPECT_DOUBLE_EQ(launch.rejoin_timeout_s, 30);
}

TEST(JobSpecTest, BadValuesNameTheFlagAndTheValue) {
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--num-workers", "0"}, {}, "--num-workers must be at least 1, got 0"},
           {{"--num-servers", "-1"}, {}, "--num-servers must not be negative, got -1"},
           {{"--num-servers", "2", "--replication", "3"}, {}, "--replication must be in 1..--num-servers (2), got 3"},
           {{"--replication", "0"}, {}, "--replication must be in 1..--num-servers (1), got 0"},
           {{"--kv-store", "dist_bogus"},
            {},
            "command line: --kv-store: unknown kv-store 'dist_bogus' (known: local, device, dist_sync, "
            "dist_device_sync, dist_async, dist_ssp)"},
           {{}, {{"DTRAIN_KV_STORE", "nope"}}, "environment DTRAIN_KV_STORE: --kv-store: unknown kv-store 'nope'"},
           {{"--kv-store", "dist_sync", "--staleness", "2"},
            {},
            "--staleness: is for --kv-store dist_ssp, not dist_sync"},
           {{"--kv-store", "dist_ssp", "--staleness", "65"}, {}, "--staleness: must be in 0..64, got 65"},
           {{"--job-id", std::string(65, 'j')}, {}, "--job-id has 65 bytes, the limit is 64"},
           {{"--register-timeout", "0"}, {}, "--register-timeout must be positive, got 0"},
           {{"--sync-timeout", "0"}, {}, "--sync-timeout must be in (0, 86400] seconds"},
           {{"--sync-timeout", "86401"}, {}, "got 86401"},
           {{"--rejoin-timeout", "-1"}, {}, "--rejoin-timeout must not be negative, got -1"},
           {{"--num-workers", "two"}, {}, "command line: expected an integer for --num-workers, got 'two'"},
       }) {
    JobSpec spec;
    const absl::Status s = Parse(c.args, c.env, &spec, NodeJobSpecFlags(Role::kWorker)).status;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(s.message().find(c.message), absl::string_view::npos) << s.message();
  }
  // 64 bytes is the longest id; 0 servers leave replication unchecked (no servers to copy to).
  JobSpec longest, no_servers;
  EXPECT_TRUE(Parse({"--job-id", std::string(64, 'j')}, {}, &longest, NodeJobSpecFlags(Role::kServer)).status.ok());
  EXPECT_TRUE(Parse({"--num-servers", "0", "--replication", "2"}, {}, &no_servers, NodeJobSpecFlags(Role::kServer))
                  .status.ok());
}

TEST(JobSpecTest, OnlyTheDeclaredSettingsAreChecked) {
  JobSpec spec;
  spec.sync_timeout_s = 0;  // the scheduler has no --sync-timeout
  spec.staleness = 3;       // nor --staleness
  EXPECT_TRUE(CheckJobSpec(spec, NodeJobSpecFlags(Role::kScheduler)).ok());
  EXPECT_FALSE(CheckJobSpec(spec, NodeJobSpecFlags(Role::kWorker)).ok());
}

}  // namespace
}  // namespace dtrain
