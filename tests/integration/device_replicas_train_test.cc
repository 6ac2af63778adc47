// The trainer's multi-device path (--gpus) end to end, on CPU devices (--cpu-replicas):
// real jobs through `dtrain launch`, whose workers train model replicas through
// DeviceReplicas, push the host model's gradients and load the pulled weights back.
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);

struct Job {
  int code = -1;
  std::string out;
  std::vector<std::string> fnv;  // weights-fnv64 of worker 0, then worker 1
  double accuracy = -1;          // worker 0's final validation accuracy
};

// LeNet on 2 workers and 2 servers; `size` says how long (epochs, examples).
Job RunLenet(const std::string& kv_store, const std::vector<std::string>& extra,
             const std::vector<std::string>& size = {"--num-epochs", "1", "--num-examples", "6000"}) {
  std::vector<std::string> argv = {Bin("dtrain"), "launch", "-n",        "2",     "-s",     "2", "--kv-store",
                                   kv_store,      "--",     "--network", "lenet", "--seed", "7"};
  argv.insert(argv.end(), size.begin(), size.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  Job j;
  std::tie(j.code, j.out) = RunToEnd(argv, kRunTimeout);
  for (const char* w : {"[worker 0]", "[worker 1]"}) {
    const std::vector<std::string> v = ValuesAfter(j.out, "weights-fnv64", w);
    j.fnv.push_back(v.size() == 1 ? v[0] : "");
  }
  const std::vector<std::string> acc = ValuesAfter(j.out, "Validation-accuracy", "[worker 0] ");
  if (!acc.empty()) EXPECT_TRUE(absl::SimpleAtod(acc.back(), &j.accuracy)) << acc.back();
  return j;
}

// One replica is the host model's computation on another model object: the same
// gradients bit for bit, so the same weights as the run without replicas. This checks the
// wiring: the host model's gradients are what is pushed, and every pull reaches the replica.
TEST(DeviceReplicasTrainTest, OneCpuReplicaTrainsExactlyAsTheHostModel) {
  const Job host = RunLenet("dist_sync", {});
  ASSERT_EQ(host.code, 0) << host.out;
  const Job one = RunLenet("dist_sync", {"--cpu-replicas", "1"});
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("training 1 model replica on the CPU (--cpu-replicas 1)"), std::string::npos) << one.out;
  ASSERT_FALSE(host.fnv[0].empty()) << host.out;
  EXPECT_EQ(one.fnv[0], host.fnv[0]);
  EXPECT_EQ(one.fnv[1], host.fnv[0]);
}

// Two replicas per worker split each batch; their summed gradient is the batch's up to
// float rounding, so the model learns as well, and dist_device_sync's workers, which all
// pull the servers' weights, end with identical weights.
TEST(DeviceReplicasTrainTest, TwoCpuReplicasLearnAsOneModelAndDistDeviceSyncWorkersAgree) {
  const Job host = RunLenet("dist_sync", {});
  ASSERT_EQ(host.code, 0) << host.out;
  const Job two = RunLenet("dist_device_sync", {"--cpu-replicas", "2", "--disp-batches", "20"});
  ASSERT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("training 2 model replicas on the CPU (--cpu-replicas 2)"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("Epoch[0] Batch [20]"), std::string::npos) << two.out;
  ASSERT_FALSE(two.fnv[0].empty()) << two.out;
  EXPECT_EQ(two.fnv[0], two.fnv[1]) << "dist_device_sync workers ended with different weights";
  EXPECT_GE(two.accuracy, 0.70) << two.out;
  EXPECT_NEAR(two.accuracy, host.accuracy, 0.02) << "one model: " << host.accuracy;
}

// MXNet's `device` kvstore: one process, no servers, its replicas summed locally.
TEST(DeviceReplicasTrainTest, TheDeviceKvstoreTrainsTwoCpuReplicasInOneProcess) {
  auto run = [](const std::string& kv_store, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {Bin("dtrain-worker"),
                                     "--kv-store",
                                     kv_store,
                                     "--network",
                                     "lenet",
                                     "--num-epochs",
                                     "1",
                                     "--num-examples",
                                     "3000",
                                     "--seed",
                                     "7",
                                     "--threads",
                                     "1",
                                     "--metrics-port",
                                     "-1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunToEnd(argv, kRunTimeout);
  };
  auto accuracy = [](const std::string& out) {
    double v = -1;
    const std::vector<std::string> acc = ValuesAfter(out, "Validation-accuracy", "Training done");
    if (acc.size() == 1) EXPECT_TRUE(absl::SimpleAtod(acc[0], &v)) << acc[0];
    return v;
  };
  auto [host_code, host] = run("local", {});
  ASSERT_EQ(host_code, 0) << host;
  auto [code, two] = run("device", {"--cpu-replicas", "2"});
  ASSERT_EQ(code, 0) << two;
  EXPECT_NE(two.find("training 2 model replicas on the CPU (--cpu-replicas 2)"), std::string::npos) << two;
  EXPECT_GE(accuracy(two), 0.65) << two;
  EXPECT_NEAR(accuracy(two), accuracy(host), 0.02) << host;
}

// A resume loads the checkpoint into the host model, which the replicas must then be given:
// two epochs straight and one epoch plus a resume end on the same weights, as without replicas.
TEST(DeviceReplicasTrainTest, AResumeGivesTheReplicasTheCheckpointsWeights) {
  const std::string dir = MakeTempDir();
  auto run = [&](const std::string& epochs, std::vector<std::string> extra) {
    extra.insert(extra.end(), {"--batch-size", "50", "--cpu-replicas", "2"});
    return RunLenet("dist_device_sync", extra, {"--num-epochs", epochs, "--num-examples", "3000"});
  };
  const Job straight = run("2", {"--model-prefix", dir + "/a"});
  ASSERT_EQ(straight.code, 0) << straight.out;
  const Job first = run("1", {"--model-prefix", dir + "/b"});
  ASSERT_EQ(first.code, 0) << first.out;
  const Job resumed = run("2", {"--load-epoch", "1", "--model-prefix", dir + "/b"});
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("resuming from epoch 1"), std::string::npos) << resumed.out;
  ASSERT_FALSE(straight.fnv[0].empty()) << straight.out;
  EXPECT_EQ(resumed.fnv[0], straight.fnv[0]);
  EXPECT_EQ(resumed.fnv[1], straight.fnv[0]);
  std::filesystem::remove_all(dir);
}

// A GPU asked of a LibTorch without CUDA is refused at start, by name, before the job
// waits on the worker (the replicas' path is otherwise the same as the CPU replicas').
TEST(DeviceReplicasTrainTest, GpusOnACpuLibTorchAreRefusedAtStart) {
  auto [code, out] = RunToEnd({Bin("dtrain-worker"), "--gpus", "0", "--network", "lenet"}, absl::Seconds(60));
  if (out.find("LibTorch has no CUDA") == std::string::npos) GTEST_SKIP() << "this LibTorch has CUDA: " << out;
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--gpus 0: this worker's LibTorch has no CUDA (torch::cuda::is_available() is false)"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace dtrain::testing
