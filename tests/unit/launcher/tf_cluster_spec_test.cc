// TensorFlow 1 style specs: flags and TF_CONFIG parsed, checked and mapped
// to dtrain's roles; the task-is-this-host check with an injected notion of "local".
#include "services/launcher/tf_cluster_spec.h"

#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/launcher/tf_host_check.h"

namespace dtrain::launcher {
namespace {

using ::testing::HasSubstr;

TfFlags Flags(std::string ps, std::string workers, std::string job, int64_t index) {
  return TfFlags{std::move(ps), std::move(workers), std::move(job), index};
}

TEST(TfClusterSpecTest, FlagsMapPsToServersAndWorkersToWorkers) {
  auto ps = FromTfFlags(Flags("10.0.0.1:2222,10.0.0.2:2222", "10.0.0.3:2222,10.0.0.4:2222", "ps", 1));
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->role, Role::kServer);
  EXPECT_EQ(ps->rank, 1);
  EXPECT_EQ(ps->address(), "10.0.0.2:2222");
  EXPECT_EQ(ps->task_name, "ps 1");
  EXPECT_EQ(CanonicalClusterSpec(ps->cluster), "ps=10.0.0.1:2222,10.0.0.2:2222;worker=10.0.0.3:2222,10.0.0.4:2222");

  auto worker = FromTfFlags(Flags("10.0.0.1:2222", " 10.0.0.3:2222 , 10.0.0.4:2222", "worker", 1));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->role, Role::kWorker);
  EXPECT_EQ(worker->rank, 1);
  EXPECT_EQ(worker->address(), "10.0.0.4:2222");
  EXPECT_EQ(worker->task_text, "--job_name=worker --task_index=1");
  EXPECT_EQ(SchedulerAddressOf(worker->cluster, 0), "10.0.0.3:2222");
  EXPECT_EQ(SchedulerAddressOf(worker->cluster, 9000), "10.0.0.3:9000");
}

TEST(TfClusterSpecTest, Ipv6NeedsBracketsAndIsKeptInThem) {
  auto ok = FromTfFlags(Flags("[fd00::1]:2222", "[fd00::2]:2222", "worker", 0));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->cluster.ps[0], "[fd00::1]:2222");
  EXPECT_EQ(SchedulerAddressOf(ok->cluster, 2300), "[fd00::2]:2300");
  auto bad = FromTfFlags(Flags("fd00::1:2222", "h:1", "ps", 0));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--ps_hosts entry 0"));
}

TEST(TfClusterSpecTest, TaskIndexOutOfRangeNamesTheListAndItsLength) {
  auto s = FromTfFlags(Flags("h1:2222", "h2:2222,h3:2222", "worker", 2));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "--task_index=2 is out of range: --worker_hosts lists 2 hosts (h2:2222,h3:2222), so it must be 0..1");
  auto one = FromTfFlags(Flags("h1:2222", "h2:2222", "ps", 1));
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().message(),
            "--task_index=1 is out of range: --ps_hosts lists 1 host (h1:2222), so it must be 0");
  EXPECT_THAT(std::string(FromTfFlags(Flags("h1:1", "h2:1", "ps", -1)).status().message()),
              HasSubstr("--task_index is required"));
  EXPECT_THAT(std::string(FromTfFlags(Flags("h1:1", "h2:1", "ps", -3)).status().message()), HasSubstr("negative"));
}

TEST(TfClusterSpecTest, BadJobNamesHostsAndDuplicatesAreRefusedByName) {
  EXPECT_THAT(std::string(FromTfFlags(Flags("h1:1", "h2:1", "chief", 0)).status().message()),
              HasSubstr("--job_name 'chief': expected ps or worker"));
  EXPECT_THAT(std::string(FromTfFlags(Flags("h1:1", "h2:1", "", 0)).status().message()),
              HasSubstr("--job_name is required"));
  EXPECT_THAT(std::string(FromTfFlags(Flags("h1", "h2:1", "ps", 0)).status().message()),
              HasSubstr("--ps_hosts entry 0"));
  EXPECT_THAT(std::string(FromTfFlags(Flags("h1:1,,h3:1", "h2:1", "ps", 0)).status().message()),
              HasSubstr("entry 1 is empty"));
  EXPECT_THAT(std::string(FromTfFlags(Flags("h1:0", "h2:1", "ps", 0)).status().message()), HasSubstr("port 0"));
  EXPECT_THAT(std::string(FromTfFlags(Flags("", "h2:1", "worker", 0)).status().message()),
              HasSubstr("--ps_hosts is empty"));
  EXPECT_EQ(FromTfFlags(Flags("h1:1", "h2:1,h1:1", "ps", 0)).status().message(),
            "h1:1 is listed twice, as ps 0 and worker 1: every task needs its own host:port");
}

TEST(TfClusterSpecTest, TfConfigChiefIsWorkerZero) {
  const char* json = R"({"cluster": {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p:2222"]},
                         "task": {"type": "worker", "index": 1}, "environment": "cloud"})";
  auto s = FromTfConfig(json);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->role, Role::kWorker);
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->address(), "w1:2222");
  EXPECT_EQ(CanonicalClusterSpec(s->cluster), "ps=p:2222;worker=c:2222,w0:2222,w1:2222");
  EXPECT_EQ(s->NameOf(Role::kWorker, 0), "chief 0");
  EXPECT_EQ(s->NameOf(Role::kWorker, 2), "worker 1");
  EXPECT_EQ(SchedulerAddressOf(s->cluster, 0), "c:2222");

  auto chief = FromTfConfig(R"({"cluster": {"master": ["c:1"], "ps": ["p:1"]}, "task": {"type": "master"}})");
  ASSERT_TRUE(chief.ok()) << chief.status();
  EXPECT_EQ(chief->rank, 0);
  EXPECT_EQ(chief->cluster.worker, std::vector<std::string>{"c:1"});

  // Flags and TF_CONFIG with the same cluster agree on the canonical text.
  auto flags = FromTfFlags(Flags("p:2222", "c:2222,w0:2222,w1:2222", "worker", 2));
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->cluster, s->cluster);
}

TEST(TfClusterSpecTest, TfConfigEvaluatorAndMistakes) {
  auto ignored = FromTfConfig(
      R"({"cluster": {"worker": ["w:1"], "ps": ["p:1"], "evaluator": ["e:1"]}, "task": {"type": "ps", "index": 0}})");
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  ASSERT_EQ(ignored->notes.size(), 1u);
  EXPECT_THAT(ignored->notes[0], HasSubstr("cluster.evaluator (e:1) is ignored"));
  EXPECT_EQ(ignored->cluster.worker, std::vector<std::string>{"w:1"});

  auto evaluator = FromTfConfig(
      R"({"cluster": {"worker": ["w:1"], "ps": ["p:1"], "evaluator": ["e:1"]}, "task": {"type": "evaluator"}})");
  ASSERT_FALSE(evaluator.ok());
  EXPECT_THAT(std::string(evaluator.status().message()), HasSubstr("dtrain has no evaluator task"));

  EXPECT_EQ(FromTfConfig(R"({"cluster": {"worker": ["w:1"], "ps": ["p:1"]}, "task": {"type": "worker", "index": 3}})")
                .status()
                .message(),
            "TF_CONFIG task.index 3 (task.type worker) is out of range: TF_CONFIG cluster.worker lists 1 host (w:1), "
            "so it must be 0");
  EXPECT_THAT(std::string(FromTfConfig("{not json").status().message()), HasSubstr("TF_CONFIG is not JSON"));
  EXPECT_THAT(std::string(FromTfConfig(R"({"cluster": {"worker": {"0": "w:1"}, "ps": ["p:1"]}})").status().message()),
              HasSubstr("must be a list"));
  EXPECT_THAT(std::string(FromTfConfig(R"({"cluster": {"worker": ["w:1"], "ps": ["p:1"], "tpu": ["t:1"]},
                                          "task": {"type": "ps"}})")
                              .status()
                              .message()),
              HasSubstr("cluster.tpu: unknown job"));
  EXPECT_THAT(std::string(FromTfConfig(R"({"cluster": {"worker": ["w:1"], "ps": ["p:1"]}, "task": {"type": "chief"}})")
                              .status()
                              .message()),
              HasSubstr("cluster has no chief"));
  EXPECT_THAT(std::string(FromTfConfig(R"({"cluster": {"worker": ["w:1", "w:1"], "ps": ["p:1"]},
                                          "task": {"type": "ps"}})")
                              .status()
                              .message()),
              HasSubstr("w:1 is listed twice, as worker 0 and worker 1"));
}

// A fake "this machine": the hosts in `local`.
std::function<bool(const std::string&)> LocalIs(std::set<std::string> local) {
  return [local](const std::string& host) { return local.count(host) > 0; };
}

TEST(TfHostCheckTest, WrongTaskIndexIsRefusedNamingWhatThisHostIs) {
  auto launch = FromTfFlags(Flags("10.0.0.1:2222", "10.0.0.2:2222,10.0.0.3:2222", "worker", 0));
  ASSERT_TRUE(launch.ok());
  std::string warning;
  EXPECT_TRUE(CheckTaskIsThisHost(*launch, LocalIs({"10.0.0.2"}), &warning).ok());
  absl::Status s = CheckTaskIsThisHost(*launch, LocalIs({"10.0.0.3", "127.0.0.1"}), &warning);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "--job_name=worker --task_index=0 makes this task worker 0 at 10.0.0.2:2222, which is not an address of "
            "this machine; this machine is listed as worker 1 (10.0.0.3:2222): wrong --task_index or --job_name?");
  EXPECT_TRUE(warning.empty());
  // Nothing of the spec is here (NAT, a port forward): a warning, not a refusal.
  EXPECT_TRUE(CheckTaskIsThisHost(*launch, LocalIs({"192.168.1.5"}), &warning).ok());
  EXPECT_THAT(warning, HasSubstr("no host of the spec is an address of this machine"));
}

TEST(TfHostCheckTest, SeveralTasksOnOneMachineAndTheRealResolver) {
  auto launch = FromTfFlags(Flags("127.0.0.1:2222", "127.0.0.1:2223,127.0.0.1:2224", "worker", 1));
  ASSERT_TRUE(launch.ok());
  std::string warning;
  EXPECT_TRUE(CheckTaskIsThisHost(*launch, IsLocalHost, &warning).ok());
  EXPECT_TRUE(warning.empty());
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_FALSE(IsLocalHost("192.0.2.1"));  // TEST-NET-1: never an address here
}

}  // namespace
}  // namespace dtrain::launcher
