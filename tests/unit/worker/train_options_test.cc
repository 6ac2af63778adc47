// The worker's training flags: MXNet's defaults, range checks naming the flag.
#include "services/worker/train_options.h"

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

// A worker's JobSpec before its flags: --kv-store local unless they say otherwise.
JobSpec WorkerJob() {
  JobSpec job;
  job.mode = kDefaultWorkerMode;
  return job;
}

// The training flags and the worker's job flags through the flag parser, as
// dtrain-worker (and `dtrain launch -- ...`) reads them.
absl::Status ParseWorkerFlags(const std::vector<std::string>& args, TrainOptions* o) {
  FlagSet flags("dtrain-worker", "test");
  AddTrainFlags(flags, o);
  JobSpec job = WorkerJob();
  AddJobSpecFlags(flags, &job, NodeJobSpecFlags(Role::kWorker));
  flags.set_env_lookup([](const char*) -> const char* { return nullptr; });
  absl::Status s = flags.Parse(args);
  if (s.ok()) s = CheckJobSpec(job, NodeJobSpecFlags(Role::kWorker));
  if (!s.ok()) return s;
  return FinishTrainFlags(o, job);
}

// `dtrain launch` hands worker flags on through the environment as well.
TEST(TrainOptionsTest, ConnectionsPerServerComesFromTheEnvironment) {
  TrainOptions o;
  FlagSet flags("dtrain-worker", "test");
  AddTrainFlags(flags, &o);
  flags.set_env_lookup([](const char* name) -> const char* {
    return std::string(name) == "DTRAIN_CONNECTIONS_PER_SERVER" ? "3" : nullptr;
  });
  ASSERT_TRUE(flags.Parse(std::vector<std::string>{}).ok());
  EXPECT_EQ(o.connections_per_server, 3);
}

TEST(TrainOptionsTest, DefaultsAreMxnetsAndBadValuesNameTheFlag) {
  TrainOptions o;
  EXPECT_DOUBLE_EQ(o.lr, 0.05);
  EXPECT_DOUBLE_EQ(o.mom, 0.9);
  EXPECT_EQ(o.batch_size, 64);
  ASSERT_TRUE(FinishTrainFlags(&o, WorkerJob()).ok());
  EXPECT_EQ(o.lr_step_epoch_list, std::vector<int64_t>{10});
  EXPECT_EQ(o.mode, KVStoreMode::kLocal) << "MXNet's train_mnist.py default";

  auto check = [](auto mutate, const std::string& flag) {
    TrainOptions t;
    mutate(t);
    absl::Status s = FinishTrainFlags(&t, WorkerJob());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(flag), absl::string_view::npos) << s.message();
  };
  check([](TrainOptions& t) { t.batch_size = 0; }, "--batch-size");
  check([](TrainOptions& t) { t.optimizer = "rmsprop"; }, "--optimizer");
  check([](TrainOptions& t) { t.load_epoch = 2; }, "--load-epoch");  // no prefix
  check([](TrainOptions& t) { t.mom = 1.0; }, "--mom");
  // Flags parsed into their values as they are read, and the job's, checked with the JobSpec.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"--lr-step-epochs", "a,b"},
                                                                                    {"--kv-store", "dist_bogus"},
                                                                                    {"--sync-timeout", "0"},
                                                                                    {"--sync-timeout", "86401"}}) {
    TrainOptions t;
    absl::Status s = ParseWorkerFlags(args, &t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << args[0];
    EXPECT_NE(s.message().find(args[0]), absl::string_view::npos) << s.message();
  }
}

TEST(TrainOptionsTest, HiddenWidthsForTheMlp) {
  TrainOptions o;
  ASSERT_TRUE(ParseWorkerFlags({"--network", "mlp", "--hidden", "2048,2048"}, &o).ok());
  EXPECT_EQ(o.network_spec.name, "mlp");
  EXPECT_EQ(o.network_spec.hidden, (std::vector<int64_t>{2048, 2048}));

  // No --hidden: MXNet's mlp, 128,64; lenet has none.
  TrainOptions d;
  ASSERT_TRUE(ParseWorkerFlags({"--network", "mlp"}, &d).ok());
  EXPECT_EQ(d.network_spec.hidden, (std::vector<int64_t>{128, 64}));
  TrainOptions l;
  ASSERT_TRUE(ParseWorkerFlags({"--network=lenet"}, &l).ok());
  EXPECT_TRUE(l.network_spec.hidden.empty());
}

TEST(TrainOptionsTest, BadHiddenListsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--hidden", "2048,"}, "--hidden: '2048,' has an empty item"},
           {{"--hidden", "2048,x"}, "--hidden: 'x' in '2048,x' is not an integer"},
           {{"--hidden", "0,64"}, "--hidden: width 0 in '0,64' is out of range"},
           {{"--hidden", "-5"}, "--hidden: width -5"},
           {{"--hidden", " "}, "--hidden: empty list"},
           {{"--hidden", "65536,65536"}, "--hidden: mlp with hidden layers 65536,65536 has"},
           {{"--network", "lenet", "--hidden", "64"}, "--hidden: the lenet network has no configurable hidden layers"},
           {{"--network", "vgg"}, "--network: \"vgg\" is not one of mlp, lenet, resnet, resnet18"},
           {{"--network", "resnet", "--num-layers", "21"}, "--num-layers: resnet: 21 layers is not 6n+2"},
           {{"--network", "lenet", "--num-layers", "20"}, "--num-layers: the lenet network has a fixed depth"},
           {{"--network", "resnet", "--augment", "yes"}, "--augment: \"yes\" is not auto, on or off"},
       }) {
    TrainOptions o;
    absl::Status s = ParseWorkerFlags(c.args, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(s.message().find(c.message), absl::string_view::npos) << s.message();
  }
}

// Gradient compression: MXNet's fit.py names, dist_* only.
TEST(TrainOptionsTest, GradientCompressionFlags) {
  TrainOptions d;
  ASSERT_TRUE(ParseWorkerFlags({}, &d).ok());
  EXPECT_EQ(d.compression.type, kv::CompressionType::kNone);
  TrainOptions o;
  ASSERT_TRUE(ParseWorkerFlags({"--kv-store", "dist_sync", "--gc-type", "2bit", "--gc-threshold", "0.25"}, &o).ok());
  EXPECT_EQ(o.compression.type, kv::CompressionType::kTwoBit);
  EXPECT_EQ(o.compression.threshold, 0.25f);
  EXPECT_EQ(o.pull_compression, kv::CompressionType::kInt8) << "a compressed push compresses the pull";
  TrainOptions p;
  ASSERT_TRUE(ParseWorkerFlags({"--kv-store", "dist_device_sync", "--pull-gc-type", "int8"}, &p).ok());
  EXPECT_EQ(p.pull_compression, kv::CompressionType::kInt8);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--kv-store", "dist_sync", "--gc-type", "4bit"}, "--gc-type: unknown gradient compression \"4bit\""},
           {{"--kv-store", "dist_sync", "--gc-type", "2bit", "--gc-threshold", "0"}, "--gc-threshold: must be > 0"},
           {{"--kv-store", "local", "--gc-type", "fp16"}, "--gc-type: compresses the pushes to the servers"},
           {{"--kv-store", "dist_sync", "--pull-gc-type", "2bit"}, "--pull-gc-type: 2bit's fixed quantum"},
           {{"--kv-store", "dist_async", "--pull-gc-type", "int8"}, "--pull-gc-type: sends each step's weight change"},
           {{"--kv-store", "dist_ssp", "--pull-gc-type", "fp16"}, "not --kv-store dist_ssp"},
           {{"--kv-store", "dist_sync", "--pull-gc-type", "int4"}, "--pull-gc-type: unknown gradient compression"},
       }) {
    TrainOptions t;
    absl::Status s = ParseWorkerFlags(c.args, &t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(s.message().find(c.message), absl::string_view::npos) << s.message();
  }
}

// Without --pull-gc-type the pulls follow --gc-type where the mode can pack them (a float32
// pull would otherwise set the pace), and stay uncompressed where it cannot: a default
// never turns a valid command line into an error.
TEST(TrainOptionsTest, DefaultPullCompressionFollowsThePush) {
  struct Case {
    std::vector<std::string> args;
    kv::CompressionType pull;
  };
  using kv::CompressionType;
  for (const Case& c : std::vector<Case>{
           {{"--kv-store", "dist_sync"}, CompressionType::kNone},
           {{"--kv-store", "dist_sync", "--gc-type", "2bit"}, CompressionType::kInt8},
           {{"--kv-store", "dist_sync", "--gc-type", "1bit"}, CompressionType::kInt8},
           {{"--kv-store", "dist_sync", "--gc-type", "int8"}, CompressionType::kInt8},
           {{"--kv-store", "dist_sync", "--gc-type", "fp16"}, CompressionType::kFp16},
           {{"--kv-store", "dist_device_sync", "--gc-type", "2bit"}, CompressionType::kInt8},
           // Given explicitly, the pull is what the flag says, none included.
           {{"--kv-store", "dist_sync", "--gc-type", "2bit", "--pull-gc-type", "none"}, CompressionType::kNone},
           {{"--kv-store", "dist_sync", "--gc-type", "2bit", "--pull-gc-type", "1bit"}, CompressionType::kOneBit},
           {{"--kv-store", "dist_sync", "--pull-gc-type", "fp16"}, CompressionType::kFp16},
           // The modes whose pulls cannot be packed keep float32 pulls, and the command runs.
           {{"--kv-store", "dist_async", "--gc-type", "2bit"}, CompressionType::kNone},
           {{"--kv-store", "dist_ssp", "--staleness", "2", "--gc-type", "1bit"}, CompressionType::kNone},
           {{"--kv-store", "dist_async", "--gc-type", "2bit", "--pull-gc-type", "none"}, CompressionType::kNone},
       }) {
    TrainOptions t;
    absl::Status s = ParseWorkerFlags(c.args, &t);
    ASSERT_TRUE(s.ok()) << absl::StrJoin(c.args, " ") << ": " << s;
    EXPECT_EQ(t.pull_compression, c.pull) << absl::StrJoin(c.args, " ");
  }
}

// 2bit's threshold is in MXNet's units (gradients summed over the batch): --help says so.
TEST(TrainOptionsTest, TwoBitThresholdHelpNamesMxnetsUnits) {
  TrainOptions o;
  FlagSet flags("dtrain-worker", "test");
  AddTrainFlags(flags, &o);
  const std::string usage = flags.Usage();
  EXPECT_NE(usage.find("summed over the batch"), std::string::npos) << usage;
  EXPECT_NE(usage.find("threshold / --batch-size"), std::string::npos) << usage;
}

TEST(TrainOptionsTest, StalenessOverlapAndBigarrayBoundFlags) {
  TrainOptions d;
  ASSERT_TRUE(ParseWorkerFlags({}, &d).ok());
  EXPECT_EQ(d.staleness, 0);
  EXPECT_TRUE(d.overlap) << "overlap is the default";
  TrainOptions sequential;
  ASSERT_TRUE(ParseWorkerFlags({"--no-overlap"}, &sequential).ok());
  EXPECT_FALSE(sequential.overlap);
  EXPECT_EQ(d.bigarray_bound, 0) << "chosen by the kvstore from the model and the servers (kv::AutoChunkElems)";
  TrainOptions old;
  ASSERT_TRUE(ParseWorkerFlags({"--bigarray-bound", "1048576"}, &old).ok());
  EXPECT_EQ(old.bigarray_bound, int64_t{1} << 20);
  TrainOptions o;
  ASSERT_TRUE(
      ParseWorkerFlags({"--kv-store", "dist_ssp", "--staleness", "3", "--overlap", "--bigarray-bound", "200000"}, &o)
          .ok());
  EXPECT_EQ(o.mode, KVStoreMode::kDistSsp);
  EXPECT_EQ(o.staleness, 3);
  EXPECT_TRUE(o.overlap);
  EXPECT_EQ(o.bigarray_bound, 200000);
  EXPECT_EQ(d.connections_per_server, 0) << "chosen by the transport (DefaultConnectionsPerServer)";
  TrainOptions striped;
  ASSERT_TRUE(ParseWorkerFlags({"--connections-per-server", "4"}, &striped).ok());
  EXPECT_EQ(striped.connections_per_server, 4);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--kv-store", "dist_sync", "--staleness", "2"}, "--staleness: is for --kv-store dist_ssp, not dist_sync"},
           {{"--kv-store", "dist_ssp", "--staleness", "65"}, "--staleness: must be in 0..64"},
           {{"--bigarray-bound", "100"}, "--bigarray-bound: 100 is not in 1024..1048576 elements"},
           {{"--bigarray-bound", "2000000"}, "--bigarray-bound: 2000000 is not in 1024..1048576 elements"},
           {{"--connections-per-server", "17"}, "--connections-per-server: 17 is not in 1..16"},
           {{"--connections-per-server", "-1"}, "--connections-per-server: -1 is not in 1..16"},
       }) {
    TrainOptions t;
    absl::Status s = ParseWorkerFlags(c.args, &t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(s.message().find(c.message), absl::string_view::npos) << s.message();
  }
}

// --gpus: MXNet's comma list, parsed into gpu_list; the CPU when empty.
TEST(TrainOptionsTest, GpusAreACommaListOfOrdinals) {
  TrainOptions o;
  ASSERT_TRUE(ParseWorkerFlags({}, &o).ok());
  EXPECT_TRUE(o.gpu_list.empty());
  ASSERT_TRUE(ParseWorkerFlags({"--gpus", "0,1"}, &o).ok());
  EXPECT_EQ(o.gpu_list, (std::vector<int>{0, 1}));
  TrainOptions bad;
  absl::Status s = ParseWorkerFlags({"--gpus", "0-3"}, &bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--gpus: \"0-3\" is not a GPU ordinal"), absl::string_view::npos) << s;
}

// --cpu-replicas: the --gpus path on CPU devices, for tests; never both.
TEST(TrainOptionsTest, CpuReplicasAreACountAndExcludeGpus) {
  TrainOptions o;
  ASSERT_TRUE(FinishTrainFlags(&o, WorkerJob()).ok());
  EXPECT_EQ(o.cpu_replicas, 0);
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--cpu-replicas", "-1"}, "--cpu-replicas: must be in 0..64"},
           {{"--cpu-replicas", "65"}, "--cpu-replicas: must be in 0..64"},
           {{"--cpu-replicas", "2", "--gpus", "0"}, "--cpu-replicas: cannot be combined with --gpus"},
       }) {
    TrainOptions t;
    absl::Status s = ParseWorkerFlags(args, &t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_EQ(s.message(), message);
  }
  TrainOptions two;
  ASSERT_TRUE(ParseWorkerFlags({"--cpu-replicas", "2"}, &two).ok());
  EXPECT_EQ(two.cpu_replicas, 2);
}

}  // namespace
}  // namespace dtrain::worker
