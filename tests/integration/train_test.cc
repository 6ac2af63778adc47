// End to end, with real processes on loopback: `dtrain launch` starts a scheduler,
// parameter servers and workers, which train on a subset of Fashion-MNIST.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/integration/common/subprocess.h"

namespace dtrain::testing {
namespace {

constexpr absl::Duration kRunTimeout = absl::Minutes(5);

std::vector<std::string> Launch(int workers, int servers, const std::string& kv,
                                const std::vector<std::string>& worker_flags) {
  std::vector<std::string> argv = {
      Bin("dtrain"), "launch", "-n", std::to_string(workers), "-s", std::to_string(servers), "--kv-store", kv, "--"};
  argv.insert(argv.end(), worker_flags.begin(), worker_flags.end());
  return argv;
}

double LastDouble(const std::vector<std::string>& values) {
  double v = -1;
  if (!values.empty()) EXPECT_TRUE(absl::SimpleAtod(values.back(), &v)) << values.back();
  return v;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TrainTest, DistSyncLenetLearnsAndWorkersEndBitIdentical) {
  const std::string dir = MakeTempDir();
  auto [code, out] = RunToEnd(Launch(2, 2, "dist_sync",
                                     {"--network", "lenet", "--num-epochs", "1", "--num-examples", "12000",
                                      "--disp-batches", "40", "--model-prefix", dir + "/lenet"}),
                              kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  // Stated accuracy for 1 epoch on 12k examples (the full 3-epoch run reaches >= 0.88).
  const double acc0 = LastDouble(ValuesAfter(out, "Validation-accuracy", "[worker 0]"));
  const double acc1 = LastDouble(ValuesAfter(out, "Validation-accuracy", "[worker 1]"));
  EXPECT_GE(acc0, 0.70) << out;
  EXPECT_EQ(acc0, acc1);
  const auto fnv0 = ValuesAfter(out, "weights-fnv64", "[worker 0]");
  const auto fnv1 = ValuesAfter(out, "weights-fnv64", "[worker 1]");
  ASSERT_EQ(fnv0.size(), 1u) << out;
  ASSERT_EQ(fnv1.size(), 1u) << out;
  EXPECT_EQ(fnv0[0], fnv1[0]) << "workers ended with different weights";
  // MXNet-style progress and checkpoints.
  EXPECT_NE(out.find("Epoch[0] Batch [40]"), std::string::npos) << out;
  EXPECT_NE(out.find("Epoch[0] Time cost="), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir + "/lenet-symbol.json"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/lenet-0001.params"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/lenet-0001.states"));
  std::filesystem::remove_all(dir);
}

// Two epochs straight must equal one epoch, a stop, and a resume from the
// checkpoint: weights and momentum both come back exactly.
TEST(TrainTest, ResumeFromLoadEpochContinuesExactly) {
  const std::string dir = MakeTempDir();
  const std::vector<std::string> common = {"--network", "lenet", "--num-examples", "4000", "--batch-size", "50"};
  auto flags = [&](std::vector<std::string> extra) {
    std::vector<std::string> f = common;
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  };
  auto straight =
      RunToEnd(Launch(2, 2, "dist_sync", flags({"--num-epochs", "2", "--model-prefix", dir + "/a"})), kRunTimeout);
  ASSERT_EQ(straight.first, 0) << straight.second;
  // `dtrain launch` runs on one machine: its servers listen on loopback, not on every interface.
  EXPECT_TRUE(std::regex_search(straight.second, std::regex(R"(\[server 0\][^\n]* listening on 127\.0\.0\.1:[0-9]+;)")))
      << straight.second;
  auto first =
      RunToEnd(Launch(2, 2, "dist_sync", flags({"--num-epochs", "1", "--model-prefix", dir + "/b"})), kRunTimeout);
  ASSERT_EQ(first.first, 0) << first.second;
  auto resumed = RunToEnd(
      Launch(2, 2, "dist_sync", flags({"--num-epochs", "2", "--load-epoch", "1", "--model-prefix", dir + "/b"})),
      kRunTimeout);
  ASSERT_EQ(resumed.first, 0) << resumed.second;
  EXPECT_NE(resumed.second.find("resuming from epoch 1"), std::string::npos) << resumed.second;
  EXPECT_EQ(resumed.second.find("Epoch[0]"), std::string::npos) << "epoch 0 was trained again";
  EXPECT_EQ(ValuesAfter(straight.second, "weights-fnv64", "[worker 0]"),
            ValuesAfter(resumed.second, "weights-fnv64", "[worker 0]"));
  EXPECT_EQ(ReadFile(dir + "/a-0002.params"), ReadFile(dir + "/b-0002.params"));
  // The .states files differ only in their run ids: a and b are two runs.
  auto a = checkpoint::ReadStates(dir + "/a-0002.states");
  auto b = checkpoint::ReadStates(dir + "/b-0002.states");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_TRUE(a->run && b->run);
  EXPECT_NE(a->run->run_id, b->run->run_id);
  EXPECT_EQ(b->run->run_id, checkpoint::ReadStates(dir + "/b-0001.states")->run->run_id) << "a resume keeps its run";
  b->run->run_id = a->run->run_id;
  ASSERT_TRUE(checkpoint::WriteStates(dir + "/b-cmp.states", *b).ok());
  ASSERT_TRUE(checkpoint::WriteStates(dir + "/a-cmp.states", *a).ok());
  EXPECT_EQ(ReadFile(dir + "/a-cmp.states"), ReadFile(dir + "/b-cmp.states"));
  std::filesystem::remove_all(dir);
}

// No --bigarray-bound: on 2 servers LeNet's fc1 is cut into 8 keys (kv::AutoChunkElems),
// and a resume without the flag cuts the keys as its checkpoint was cut, whatever the
// bound that was and however many servers run now. A bound of the user's own must be
// passed again, and the refusal says so.
TEST(TrainTest, ResumeFindsTheBoundItsCheckpointWasCutWith) {
  const std::string dir = MakeTempDir();
  auto run = [&](int servers, const std::string& prefix, std::vector<std::string> extra) {
    std::vector<std::string> f = {"--network",    "lenet", "--num-examples", "2000",
                                  "--batch-size", "50",    "--model-prefix", dir + "/" + prefix};
    f.insert(f.end(), extra.begin(), extra.end());
    return RunToEnd(Launch(2, servers, "dist_sync", f), kRunTimeout);
  };
  auto keys_in = [&](const std::string& file) {
    auto states = checkpoint::ReadStates(dir + "/" + file);
    EXPECT_TRUE(states.ok()) << states.status();
    return states.ok() ? states->keys.size() : size_t{0};
  };
  // LeNet's 8 tensors; fc1 (400,000 elements) whole or in 8 keys of at most 50,176.
  constexpr size_t kWhole = 8, kCut = 15;

  auto fresh = run(2, "auto", {"--num-epochs", "1"});
  ASSERT_EQ(fresh.first, 0) << fresh.second;
  EXPECT_NE(fresh.second.find("placement: parameters above 50176 elements are cut into keys of that many"),
            std::string::npos)
      << fresh.second;
  EXPECT_EQ(fresh.second.find("would spread them"), std::string::npos) << "advice for a placement already even";
  EXPECT_EQ(keys_in("auto-0001.states"), kCut);
  auto on_three = run(3, "auto", {"--num-epochs", "2", "--load-epoch", "1"});
  ASSERT_EQ(on_three.first, 0) << on_three.second;
  EXPECT_EQ(keys_in("auto-0002.states"), kCut);

  auto old = run(2, "old", {"--num-epochs", "1", "--bigarray-bound", "1048576"});  // the bound before it was chosen
  ASSERT_EQ(old.first, 0) << old.second;
  EXPECT_NE(old.second.find("--bigarray-bound 50176 would spread them"), std::string::npos) << old.second;
  EXPECT_EQ(keys_in("old-0001.states"), kWhole);
  auto old_resumed = run(2, "old", {"--num-epochs", "2", "--load-epoch", "1"});
  ASSERT_EQ(old_resumed.first, 0) << old_resumed.second;
  EXPECT_EQ(keys_in("old-0002.states"), kWhole);

  auto own = run(2, "own", {"--num-epochs", "1", "--bigarray-bound", "20000"});
  ASSERT_EQ(own.first, 0) << own.second;
  auto own_resumed = run(2, "own", {"--num-epochs", "2", "--load-epoch", "1"});
  EXPECT_NE(own_resumed.first, 0) << own_resumed.second;
  EXPECT_NE(own_resumed.second.find("with a --bigarray-bound of its own (pass the same)"), std::string::npos)
      << own_resumed.second;
  auto own_again = run(2, "own", {"--num-epochs", "2", "--load-epoch", "1", "--bigarray-bound", "20000"});
  EXPECT_EQ(own_again.first, 0) << own_again.second;
  std::filesystem::remove_all(dir);
}

TEST(TrainTest, DistAsyncLenetLearns) {
  auto [code, out] = RunToEnd(
      // Staleness adds momentum of its own (Mitliagkas et al. 2016), so async uses less.
      Launch(2, 1, "dist_async",
             {"--network", "lenet", "--num-epochs", "1", "--num-examples", "12000", "--lr", "0.1", "--mom", "0.5"}),
      kRunTimeout);
  ASSERT_EQ(code, 0) << out;
  EXPECT_GE(LastDouble(ValuesAfter(out, "Validation-accuracy", "[worker 0]")), 0.65) << out;
}

TEST(TrainTest, LocalMlpLearnsAndResumes) {
  const std::string dir = MakeTempDir();
  const std::vector<std::string> base = {Bin("dtrain-worker"), "--kv-store", "local",          "--network", "mlp",
                                         "--num-examples",     "6000",       "--model-prefix", dir + "/mlp"};
  auto args = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto straight = RunToEnd(args({"--num-epochs", "2"}), kRunTimeout);
  ASSERT_EQ(straight.first, 0) << straight.second;
  EXPECT_GE(LastDouble(ValuesAfter(straight.second, "Validation-accuracy")), 0.70) << straight.second;
  // Epoch 2 of the straight run is there: going back to epoch 1 must say it replaces it.
  auto resumed = RunToEnd(args({"--num-epochs", "2", "--load-epoch", "1", "--overwrite-checkpoints"}), kRunTimeout);
  ASSERT_EQ(resumed.first, 0) << resumed.second;
  EXPECT_EQ(ValuesAfter(straight.second, "weights-fnv64"), ValuesAfter(resumed.second, "weights-fnv64"));
  std::filesystem::remove_all(dir);
}

// A job whose loss turns NaN (a learning rate of 1e20 on the real data does so at step
// 1) must fail, naming the step and the rank, and push nothing non-finite.
TEST(TrainTest, DivergingTrainingFailsNamingStepAndRank) {
  auto [code, out] = RunToEnd(
      Launch(2, 1, "dist_sync", {"--network", "mlp", "--num-epochs", "1", "--num-examples", "2000", "--lr", "1e20"}),
      kRunTimeout);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("step 1 on rank 0: training diverged"), std::string::npos) << out;
  EXPECT_NE(out.find("non-finite gradients in fc1.weight"), std::string::npos) << out;
  EXPECT_EQ(out.find("Training done"), std::string::npos) << out;
}

// A dist_sync checkpoint resumed as dist_async with another batch size would load and
// train on, to a worse model: refused, naming the saved and the requested values.
TEST(TrainTest, ResumeWithOtherSettingsIsRefused) {
  const std::string dir = MakeTempDir();
  const std::vector<std::string> common = {"--network", "mlp", "--num-examples", "2000", "--model-prefix", dir + "/m"};
  auto flags = [&](std::vector<std::string> extra) {
    std::vector<std::string> f = common;
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  };
  auto first = RunToEnd(Launch(2, 1, "dist_sync", flags({"--num-epochs", "1"})), kRunTimeout);
  ASSERT_EQ(first.first, 0) << first.second;
  auto other = RunToEnd(
      Launch(2, 1, "dist_async", flags({"--num-epochs", "2", "--load-epoch", "1", "--batch-size", "32"})), kRunTimeout);
  EXPECT_NE(other.first, 0) << other.second;
  EXPECT_NE(other.second.find("--kv-store dist_sync (saved) vs dist_async (requested)"), std::string::npos)
      << other.second;
  EXPECT_NE(other.second.find("--batch-size 64 (saved) vs 32 (requested)"), std::string::npos) << other.second;
  EXPECT_FALSE(std::filesystem::exists(dir + "/m-0002.params"));
  std::filesystem::remove_all(dir);
}

// One prefix, one run: a fresh start over an older run's epochs is refused (it would
// rewrite -0001 and keep -0005, which inference would serve as newest) until asked to
// start over; temp files of a writer that was killed are swept.
TEST(TrainTest, PrefixHoldsOneRunsCheckpoints) {
  const std::string dir = MakeTempDir();
  const std::vector<std::string> base = {Bin("dtrain-worker"), "--kv-store", "local",          "--network", "mlp",
                                         "--num-examples",     "1000",       "--model-prefix", dir + "/m"};
  auto args = [&](std::vector<std::string> extra) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto older = RunToEnd(args({"--num-epochs", "2"}), kRunTimeout);
  ASSERT_EQ(older.first, 0) << older.second;
  const std::string old_params = ReadFile(dir + "/m-0001.params");
  // What a kill in the middle of a save leaves: temp files of a process that is gone.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string stale = dir + "/m-0003.params.tmp." + std::to_string(gone);
  std::ofstream(stale) << "partial";

  auto fresh = RunToEnd(args({"--num-epochs", "1"}), kRunTimeout);
  EXPECT_NE(fresh.first, 0) << fresh.second;
  EXPECT_NE(fresh.second.find(dir + "/m-0002.params"), std::string::npos) << fresh.second;
  EXPECT_NE(fresh.second.find("--overwrite-checkpoints"), std::string::npos) << fresh.second;
  EXPECT_NE(fresh.second.find("--load-epoch 2"), std::string::npos) << fresh.second;
  EXPECT_EQ(ReadFile(dir + "/m-0001.params"), old_params) << "a refused run must not touch the set";
  EXPECT_FALSE(std::filesystem::exists(stale)) << "stale temp file not swept";

  auto over = RunToEnd(args({"--num-epochs", "1", "--overwrite-checkpoints"}), kRunTimeout);
  ASSERT_EQ(over.first, 0) << over.second;
  EXPECT_TRUE(std::filesystem::exists(dir + "/m-0001.params"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/m-0002.params")) << "the older run's epoch 2 was kept";
  EXPECT_FALSE(std::filesystem::exists(dir + "/m-0002.states"));
  std::filesystem::remove_all(dir);
}

TEST(TrainTest, CorruptCheckpointIsRefusedNamingTheFile) {
  const std::string dir = MakeTempDir();
  const std::vector<std::string> base = {Bin("dtrain-worker"), "--kv-store", "local",          "--network", "mlp",
                                         "--num-examples",     "1000",       "--model-prefix", dir + "/m"};
  auto first = RunToEnd(
      [&] {
        auto a = base;
        a.insert(a.end(), {"--num-epochs", "1"});
        return a;
      }(),
      kRunTimeout);
  ASSERT_EQ(first.first, 0) << first.second;
  {
    std::fstream f(dir + "/m-0001.params", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  auto resumed = RunToEnd(
      [&] {
        auto a = base;
        a.insert(a.end(), {"--num-epochs", "2", "--load-epoch", "1"});
        return a;
      }(),
      kRunTimeout);
  EXPECT_NE(resumed.first, 0);
  EXPECT_NE(resumed.second.find("m-0001.params"), std::string::npos) << resumed.second;
  // A network that does not match the checkpoint is refused too.
  auto other = RunToEnd({Bin("dtrain-worker"), "--kv-store", "local", "--network", "lenet", "--num-examples", "1000",
                         "--model-prefix", dir + "/m", "--num-epochs", "2", "--load-epoch", "1"},
                        kRunTimeout);
  EXPECT_NE(other.first, 0);
  std::filesystem::remove_all(dir);
}

TEST(TrainTest, BadFlagsAndMissingDataGetClearErrors) {
  auto bad_mode = RunToEnd({Bin("dtrain-worker"), "--kv-store", "dist_bogus"}, absl::Seconds(30));
  EXPECT_EQ(bad_mode.first, 2);
  EXPECT_NE(bad_mode.second.find("--kv-store"), std::string::npos) << bad_mode.second;
  auto unknown = RunToEnd({Bin("dtrain-worker"), "--learning-rate", "0.1"}, absl::Seconds(30));
  EXPECT_EQ(unknown.first, 2);
  EXPECT_NE(unknown.second.find("unknown flag --learning-rate"), std::string::npos) << unknown.second;
  auto no_data = RunToEnd({Bin("dtrain-worker"), "--data-dir", "/nonexistent/fmnist"}, absl::Seconds(30));
  EXPECT_NE(no_data.first, 0);
  EXPECT_NE(no_data.second.find("/nonexistent/fmnist"), std::string::npos) << no_data.second;
}

}  // namespace
}  // namespace dtrain::testing
