#include "common/cluster_flags.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace dtrain {
namespace {

// An environment the test controls.
FlagSet::EnvLookup Env(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

absl::Status Parse(std::vector<std::string> args, const std::map<std::string, std::string>& env, ClusterFlags* out,
                   bool need_scheduler = true, Role role = Role::kWorker) {
  FlagSet flags("test", "");
  AddClusterFlags(flags, out, role);
  flags.set_env_lookup(Env(env));
  absl::Status s = flags.Parse(args);
  if (!s.ok()) return s;
  return FinishClusterFlags(out, role, need_scheduler, Env(env));
}

TEST(ClusterFlagsTest, DmlcVariablesCompose) {
  ClusterFlags f;
  ASSERT_TRUE(Parse({},
                    {{"DMLC_PS_ROOT_URI", "10.0.0.1"},
                     {"DMLC_PS_ROOT_PORT", "9091"},
                     {"DMLC_NUM_WORKER", "4"},
                     {"DMLC_NUM_SERVER", "2"},
                     {"DMLC_NODE_HOST", "10.0.0.7"}},
                    &f)
                  .ok());
  EXPECT_EQ(f.scheduler, "10.0.0.1:9091");
  EXPECT_EQ(f.job.num_workers, 4);
  EXPECT_EQ(f.job.num_servers, 2);
  EXPECT_EQ(f.host, "10.0.0.7");
  EXPECT_EQ(f.rank, -1);
}

TEST(ClusterFlagsTest, DtrainNamesBeatDmlcAndFlagsBeatBoth) {
  ClusterFlags f;
  ASSERT_TRUE(Parse({"--num-workers", "3"},
                    {{"DTRAIN_SCHEDULER_ADDR", "sched:1"},
                     {"DMLC_PS_ROOT_URI", "x"},
                     {"DMLC_PS_ROOT_PORT", "2"},
                     {"DTRAIN_NUM_WORKERS", "5"},
                     {"DMLC_NUM_WORKER", "6"},
                     {"DTRAIN_RANK", "1"},
                     {"DTRAIN_PORT", "7000"},
                     {"DTRAIN_REGISTER_TIMEOUT", "5"},
                     {"DTRAIN_HEARTBEAT_INTERVAL", "0.5"}},
                    &f)
                  .ok());
  EXPECT_EQ(f.scheduler, "sched:1");
  EXPECT_EQ(f.job.num_workers, 3);
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.port, 7000);
  EXPECT_EQ(f.host, "127.0.0.1");
  EXPECT_DOUBLE_EQ(f.job.register_timeout_s, 5);
  EXPECT_DOUBLE_EQ(f.heartbeat_interval_s, 0.5);
}

TEST(ClusterFlagsTest, ErrorsNameTheProblem) {
  ClusterFlags a;
  absl::Status s = Parse({}, {}, &a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--scheduler"), absl::string_view::npos);
  ClusterFlags b;
  EXPECT_TRUE(Parse({}, {}, &b, /*need_scheduler=*/false).ok());
  ClusterFlags c;
  s = Parse({}, {{"DMLC_PS_ROOT_URI", "10.0.0.1"}}, &c);
  EXPECT_NE(s.message().find("DMLC_PS_ROOT_PORT"), absl::string_view::npos) << s;
  ClusterFlags d;
  s = Parse({"--scheduler", "h:1", "--num-workers", "0"}, {}, &d);
  EXPECT_NE(s.message().find("--num-workers"), absl::string_view::npos) << s;
  ClusterFlags e;
  s = Parse({"--scheduler", "nocolon"}, {}, &e);
  EXPECT_NE(s.message().find("HOST:PORT"), absl::string_view::npos) << s;
  ClusterFlags g;
  s = Parse({"--scheduler", "h:1", "--heartbeat-interval", "0"}, {}, &g);
  EXPECT_NE(s.message().find("--heartbeat-interval"), absl::string_view::npos) << s;
}

// ps-lite's DMLC_WORKER_ID / DMLC_SERVER_ID are the rank each role asks for.
TEST(ClusterFlagsTest, DmlcIdsAreTheRequestedRankOfTheirRole) {
  const std::map<std::string, std::string> env = {{"DMLC_PS_ROOT_URI", "127.0.0.1"},
                                                  {"DMLC_PS_ROOT_PORT", "9091"},
                                                  {"DMLC_NUM_WORKER", "2"},
                                                  {"DMLC_WORKER_ID", "1"},
                                                  {"DMLC_SERVER_ID", "0"}};
  ClusterFlags worker, server, dtrain_rank;
  ASSERT_TRUE(Parse({}, env, &worker, true, Role::kWorker).ok());
  EXPECT_EQ(worker.rank, 1);
  ASSERT_TRUE(Parse({}, env, &server, true, Role::kServer).ok());
  EXPECT_EQ(server.rank, 0);
  auto with_rank = env;
  with_rank["DTRAIN_RANK"] = "0";
  ASSERT_TRUE(Parse({}, with_rank, &dtrain_rank, true, Role::kWorker).ok());
  EXPECT_EQ(dtrain_rank.rank, 0);  // dtrain's own name wins
}

// A spec-launched job's cluster spec reaches every role's flags from the variable
// `dtrain run` sets; the flag wins over it.
TEST(ClusterFlagsTest, TheClusterSpecComesFromItsVariableOrTheFlag) {
  const std::map<std::string, std::string> env = {{"DTRAIN_SCHEDULER_ADDR", "h:1"},
                                                  {"DTRAIN_CLUSTER_SPEC", "ps=h:2;worker=h:1"}};
  for (Role role : {Role::kServer, Role::kWorker}) {
    ClusterFlags from_env, from_flag, none;
    ASSERT_TRUE(Parse({}, env, &from_env, true, role).ok());
    EXPECT_EQ(from_env.cluster_spec, "ps=h:2;worker=h:1") << RoleName(role);
    ASSERT_TRUE(Parse({"--cluster-spec", "ps=h:3;worker=h:1"}, env, &from_flag, true, role).ok());
    EXPECT_EQ(from_flag.cluster_spec, "ps=h:3;worker=h:1") << RoleName(role);
    ASSERT_TRUE(Parse({"--scheduler", "h:1"}, {}, &none, true, role).ok());
    EXPECT_EQ(none.cluster_spec, "") << RoleName(role);
  }
}

// Recovery: every role (servers too) takes the job id and the rejoin timeout, from
// flags or DTRAIN_JOB_ID / DTRAIN_REJOIN_TIMEOUT.
// --replication / DTRAIN_REPLICATION: 1 by default, at most --num-servers.
TEST(ClusterFlagsTest, ReplicationIsBetweenOneAndTheServers) {
  ClusterFlags plain;
  ASSERT_TRUE(Parse({"--scheduler", "h:1", "--num-servers", "3"}, {}, &plain).ok());
  EXPECT_EQ(plain.job.replication, 1);
  ClusterFlags env;
  ASSERT_TRUE(Parse({"--scheduler", "h:1", "--num-servers", "3"}, {{"DTRAIN_REPLICATION", "2"}}, &env).ok());
  EXPECT_EQ(env.job.replication, 2);
  ClusterFlags more;
  absl::Status s = Parse({"--scheduler", "h:1", "--num-servers", "2", "--replication", "3"}, {}, &more);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--replication must be in 1..--num-servers (2), got 3"), absl::string_view::npos)
      << s.message();
  ClusterFlags zero;
  EXPECT_FALSE(Parse({"--scheduler", "h:1", "--replication", "0"}, {}, &zero).ok());
}

TEST(ClusterFlagsTest, JobIdAndRejoinTimeoutForEveryRole) {
  for (Role role : {Role::kServer, Role::kWorker}) {
    ClusterFlags from_env, from_flags, unset;
    ASSERT_TRUE(Parse({"--scheduler", "h:1"}, {{"DTRAIN_JOB_ID", "job-a"}, {"DTRAIN_REJOIN_TIMEOUT", "30"}}, &from_env,
                      true, role)
                    .ok());
    EXPECT_EQ(from_env.job.job_id, "job-a");
    EXPECT_DOUBLE_EQ(from_env.job.rejoin_timeout_s, 30);
    ASSERT_TRUE(Parse({"--scheduler", "h:1", "--job-id", "job-b", "--rejoin-timeout", "2.5"},
                      {{"DTRAIN_JOB_ID", "job-a"}}, &from_flags, true, role)
                    .ok());
    EXPECT_EQ(from_flags.job.job_id, "job-b");
    EXPECT_DOUBLE_EQ(from_flags.job.rejoin_timeout_s, 2.5);
    ASSERT_TRUE(Parse({"--scheduler", "h:1"}, {}, &unset, true, role).ok());
    EXPECT_EQ(unset.job.job_id, "");
    EXPECT_DOUBLE_EQ(unset.job.rejoin_timeout_s, 0);
  }
  ClusterFlags negative, too_long, longest;
  absl::Status s = Parse({"--scheduler", "h:1", "--rejoin-timeout", "-1"}, {}, &negative, true, Role::kServer);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--rejoin-timeout"), std::string::npos) << s;
  s = Parse({"--scheduler", "h:1", "--job-id", std::string(65, 'j')}, {}, &too_long, true, Role::kServer);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--job-id has 65 bytes, the limit is 64"), std::string::npos) << s;
  EXPECT_TRUE(Parse({"--scheduler", "h:1", "--job-id", std::string(64, 'j')}, {}, &longest).ok());
}

// Without DMLC_NODE_HOST a node advertises the address that reaches the scheduler
// (not 127.0.0.1 on every machine), or its DMLC_INTERFACE's.
TEST(ClusterFlagsTest, HostIsTheAddressThatReachesTheScheduler) {
  ClusterFlags v4;
  ASSERT_TRUE(Parse({}, {{"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT", "9091"}}, &v4).ok());
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_NE(v4.host_origin.find("route to the scheduler"), std::string::npos) << v4.host_origin;

  ClusterFlags v6;
  ASSERT_TRUE(Parse({}, {{"DMLC_PS_ROOT_URI", "::1"}, {"DMLC_PS_ROOT_PORT", "9091"}}, &v6).ok());
  EXPECT_EQ(v6.scheduler, "[::1]:9091");
  EXPECT_EQ(v6.host, "::1");

  ClusterFlags lo;
  ASSERT_TRUE(
      Parse({}, {{"DMLC_PS_ROOT_URI", "::1"}, {"DMLC_PS_ROOT_PORT", "9091"}, {"DMLC_INTERFACE", "lo"}}, &lo).ok());
  EXPECT_EQ(lo.host, "127.0.0.1");

  ClusterFlags none;
  absl::Status s =
      Parse({}, {{"DMLC_PS_ROOT_URI", "::1"}, {"DMLC_PS_ROOT_PORT", "9091"}, {"DMLC_INTERFACE", "no-such-if0"}}, &none);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no-such-if0"), std::string::npos) << s;

  ClusterFlags bad;
  s = Parse({"--scheduler", "::1:9091"}, {}, &bad);
  EXPECT_NE(s.message().find("brackets"), std::string::npos) << s;
}

}  // namespace
}  // namespace dtrain
