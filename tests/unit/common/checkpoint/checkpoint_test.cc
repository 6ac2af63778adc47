#include "common/checkpoint/checkpoint.h"
#include "common/checkpoint/checkpoint_set.h"

#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::checkpoint {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::TempDir;
using testing::WriteBytes;

std::vector<checkpoint::NamedTensor> SampleTensors() {
  return {
      {"conv1.weight", {2, 1, 2, 2}, {1, -2, 3.5f, 0, 1e-30f, -0.0f, 7, 8}},
      {"conv1.bias", {2}, {0.25f, std::numeric_limits<float>::infinity()}},
      {"scalar", {}, {42}},
      {"empty", {0, 3}, {}},
  };
}

kv::KeyState StateOf(uint64_t key, int64_t version, std::vector<float> optimizer_state) {
  kv::KeyState k;
  k.key = key;
  k.version = version;
  k.optimizer_state = std::move(optimizer_state);
  return k;
}

checkpoint::OptimizerStates SampleStates() {
  return {"adam", {StateOf(7, 3, {1, 2, 3, 4}), StateOf(1ull << 40, -1, {}), StateOf(0, 12, {0.5f})}};
}

// Rewrites the trailing CRC-32 so a hand-edited file passes the checksum and reaches
// the parser's own limits.
void FixCrc(std::string* bytes) {
  bytes->resize(bytes->size() - 4);
  uint32_t crc = crc32(0L, reinterpret_cast<const Bytef*>(bytes->data()), bytes->size());
  for (int i = 0; i < 4; ++i) bytes->push_back(static_cast<char>(crc >> (8 * i)));
}

void PutU64At(std::string* bytes, size_t pos, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*bytes)[pos + i] = static_cast<char>(v >> (8 * i));
}

TEST(CheckpointPathsTest, FollowMxnetNaming) {
  EXPECT_EQ(checkpoint::SymbolPath("/ckpt/model"), "/ckpt/model-symbol.json");
  EXPECT_EQ(checkpoint::ParamsPath("/ckpt/model", 3), "/ckpt/model-0003.params");
  EXPECT_EQ(checkpoint::StatesPath("model", 12), "model-0012.states");
  EXPECT_EQ(checkpoint::ParamsPath("m", 12345), "m-12345.params");
}

TEST(CheckpointTest, ParamsRoundTripBitExact) {
  TempDir dir;
  std::string path = checkpoint::ParamsPath(dir.File("m"), 1);
  std::vector<checkpoint::NamedTensor> in = SampleTensors();
  ASSERT_TRUE(checkpoint::WriteParams(path, in).ok());
  absl::StatusOr<std::vector<checkpoint::NamedTensor>> out = checkpoint::ReadParams(path);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[i].name, in[i].name);
    EXPECT_EQ((*out)[i].shape, in[i].shape);
    ASSERT_EQ((*out)[i].data.size(), in[i].data.size());
    // Bit-exact, so -0.0 and denormals count (memcmp: operator== would equate 0 and -0).
    if (in[i].data.empty()) continue;  // memcmp must not see the null data() of an empty vector
    EXPECT_EQ(std::memcmp((*out)[i].data.data(), in[i].data.data(), 4 * in[i].data.size()), 0) << in[i].name;
  }
  // Overwriting works and leaves nothing but the target behind.
  ASSERT_TRUE(checkpoint::WriteParams(path, {in[0]}).ok());
  EXPECT_EQ(checkpoint::ReadParams(path)->size(), 1u);
  EXPECT_THAT(dir.List(), ElementsAre("m-0001.params"));
}

TEST(CheckpointTest, StatesRoundTrip) {
  TempDir dir;
  std::string path = checkpoint::StatesPath(dir.File("m"), 2);
  ASSERT_TRUE(checkpoint::WriteStates(path, SampleStates()).ok());
  absl::StatusOr<checkpoint::OptimizerStates> out = checkpoint::ReadStates(path);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->optimizer, "adam");
  ASSERT_EQ(out->keys.size(), 3u);
  EXPECT_EQ(out->keys[0].key, 7u);
  EXPECT_EQ(out->keys[0].version, 3);
  EXPECT_EQ(out->keys[0].optimizer_state, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(out->keys[1].key, 1ull << 40);
  EXPECT_EQ(out->keys[1].version, -1);
  EXPECT_TRUE(out->keys[1].optimizer_state.empty());
  EXPECT_EQ(out->keys[2].optimizer_state, (std::vector<float>{0.5f}));
}

TEST(CheckpointTest, WritesRefuseInconsistentInput) {
  TempDir dir;
  std::string path = dir.File("bad.params");
  EXPECT_EQ(checkpoint::WriteParams(path, {{"w", {2, 2}, {1, 2, 3}}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(checkpoint::WriteParams(path, {{"w", {1}, {1}}, {"w", {1}, {2}}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(checkpoint::WriteParams(path, {{"", {1}, {1}}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(checkpoint::WriteStates(path, {"", {}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(checkpoint::WriteStates(path, {"sgd", {StateOf(1, 0, {}), StateOf(1, 0, {})}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(dir.List().empty());
}

TEST(CheckpointTest, FlippedByteIsCrcErrorNamingFile) {
  TempDir dir;
  std::string path = dir.File("m-0001.params");
  ASSERT_TRUE(checkpoint::WriteParams(path, SampleTensors()).ok());
  std::string bytes = ReadBytes(path);
  bytes[bytes.size() / 2] ^= 0x10;
  WriteBytes(path, bytes);
  absl::Status s = checkpoint::ReadParams(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("CRC-32 mismatch")));
}

TEST(CheckpointTest, TruncatedFilesAreRefused) {
  TempDir dir;
  std::string path = dir.File("s.states");
  ASSERT_TRUE(checkpoint::WriteStates(path, SampleStates()).ok());
  std::string bytes = ReadBytes(path);
  for (size_t keep : {bytes.size() - 1, bytes.size() / 2, size_t{10}, size_t{0}}) {
    WriteBytes(path, bytes.substr(0, keep));
    absl::Status s = checkpoint::ReadStates(path).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << keep;
    EXPECT_THAT(s.message(), HasSubstr(path));
  }
}

TEST(CheckpointTest, WrongMagicIsRefused) {
  TempDir dir;
  std::string path = dir.File("m.params");
  ASSERT_TRUE(checkpoint::WriteStates(path, SampleStates()).ok());  // a .states file where params belong
  absl::Status s = checkpoint::ReadParams(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("bad magic"), HasSubstr("params")));
}

TEST(CheckpointTest, AbsurdCountsAreRefusedBeforeAllocating) {
  TempDir dir;
  std::string path = dir.File("m.params");
  ASSERT_TRUE(checkpoint::WriteParams(path, SampleTensors()).ok());
  std::string good = ReadBytes(path);

  std::string bytes = good;
  PutU64At(&bytes, 12, 1ull << 60);  // tensor count, right after magic and version
  FixCrc(&bytes);
  WriteBytes(path, bytes);
  absl::Status s = checkpoint::ReadParams(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("tensor count 1152921504606846976"));

  // First dimension of conv1.weight: after count, name length and "conv1.weight", ndim.
  bytes = good;
  PutU64At(&bytes, 12 + 8 + 4 + 12 + 4, 1ull << 50);
  FixCrc(&bytes);
  WriteBytes(path, bytes);
  EXPECT_THAT(checkpoint::ReadParams(path).status().message(), HasSubstr("impossible dimension"));

  std::string spath = dir.File("s.states");
  ASSERT_TRUE(checkpoint::WriteStates(spath, SampleStates()).ok());
  bytes = ReadBytes(spath);
  PutU64At(&bytes, 12 + 4 + 4, ~0ull);  // key count, after version and "adam"
  FixCrc(&bytes);
  WriteBytes(spath, bytes);
  s = checkpoint::ReadStates(spath).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("key count"));
}

TEST(CheckpointTest, MissingFileIsNotFound) {
  TempDir dir;
  absl::Status s = checkpoint::ReadParams(dir.File("none.params")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(dir.File("none.params")));
}

TEST(SymbolTest, RoundTripAndFormat) {
  TempDir dir;
  std::string prefix = dir.File("model");
  checkpoint::SymbolInfo info{"lenet", 3, {1, 28, 28}, {"a", "b", "c"}};
  ASSERT_TRUE(checkpoint::WriteSymbol(prefix, info).ok());
  std::string text = ReadBytes(checkpoint::SymbolPath(prefix));
  EXPECT_THAT(text, AllOf(HasSubstr("\"format\": \"dtrain-symbol-v1\""), HasSubstr("\"network\": \"lenet\"")));
  absl::StatusOr<checkpoint::SymbolInfo> out = checkpoint::ReadSymbol(prefix);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->network, "lenet");
  EXPECT_EQ(out->num_classes, 3);
  EXPECT_EQ(out->input_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(out->class_names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_THAT(dir.List(), ElementsAre("model-symbol.json"));

  EXPECT_EQ(checkpoint::WriteSymbol(prefix, {"lenet", 3, {1, 28, 28}, {"a"}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SymbolTest, BadFilesNameFileAndField) {
  TempDir dir;
  std::string prefix = dir.File("model");
  std::string path = checkpoint::SymbolPath(prefix);
  EXPECT_EQ(checkpoint::ReadSymbol(prefix).status().code(), absl::StatusCode::kNotFound);

  WriteBytes(path, "{\"network\": \"lenet\",");
  absl::Status s = checkpoint::ReadSymbol(prefix).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("malformed JSON")));

  const std::string base = R"("format":"dtrain-symbol-v1","input_shape":[1,28,28],"class_names":[])";
  WriteBytes(path, "{\"network\":\"mlp\"," + base + "}");
  s = checkpoint::ReadSymbol(prefix).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("\"num_classes\" is missing")));

  WriteBytes(path, "{\"network\":7,\"num_classes\":10," + base + "}");
  EXPECT_THAT(checkpoint::ReadSymbol(prefix).status().message(), HasSubstr("\"network\" is not"));

  WriteBytes(path, R"({"format":"other","network":"mlp","num_classes":10})");
  EXPECT_THAT(checkpoint::ReadSymbol(prefix).status().message(), HasSubstr("format \"other\""));

  WriteBytes(path, "[1, 2]");
  EXPECT_EQ(checkpoint::ReadSymbol(prefix).status().code(), absl::StatusCode::kDataLoss);

  // Empty class_names is allowed (plain MNIST has no names).
  WriteBytes(path, "{\"network\":\"mlp\",\"num_classes\":10," + base + "}");
  EXPECT_TRUE(checkpoint::ReadSymbol(prefix).ok());
}

TEST(CheckParamsMatchTest, ReportsFirstDifference) {
  std::vector<checkpoint::NamedTensor> model = {{"conv1.weight", {20, 1, 5, 5}, {}}, {"conv1.bias", {20}, {}}};
  EXPECT_TRUE(checkpoint::CheckParamsMatch("m-0003.params", model, model).ok());

  std::vector<checkpoint::NamedTensor> loaded = model;
  loaded[0].shape = {20, 1, 3, 3};
  absl::Status s = checkpoint::CheckParamsMatch("m-0003.params", loaded, model);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "m-0003.params: conv1.weight has shape [20,1,3,3], the model expects [20,1,5,5]");

  loaded = model;
  loaded[1].name = "fc1.bias";
  EXPECT_THAT(checkpoint::CheckParamsMatch("p", loaded, model).message(),
              HasSubstr("tensor #1 is fc1.bias, the model expects conv1.bias"));
  loaded = {model[0]};
  EXPECT_THAT(checkpoint::CheckParamsMatch("p", loaded, model).message(),
              HasSubstr("has 1 tensors, the model expects 2 (missing conv1.bias)"));
  loaded = model;
  loaded.push_back({"extra", {1}, {}});
  EXPECT_THAT(checkpoint::CheckParamsMatch("p", loaded, model).message(), HasSubstr("unexpected extra"));
}

TEST(NewestCompleteEpochTest, SkipsCorruptNewestAndUnrelatedFiles) {
  TempDir dir;
  std::string prefix = dir.File("model");
  EXPECT_EQ(checkpoint::NewestCompleteEpoch(prefix).status().code(), absl::StatusCode::kNotFound);
  for (int epoch : {1, 2, 3}) {
    ASSERT_TRUE(checkpoint::WriteParams(checkpoint::ParamsPath(prefix, epoch), SampleTensors()).ok());
  }
  ASSERT_TRUE(checkpoint::WriteSymbol(prefix, {"mlp", 10, {1, 28, 28}, {}}).ok());
  WriteBytes(dir.File("model-0009.states"), "x");
  WriteBytes(dir.File("other-0008.params"), "x");
  WriteBytes(dir.File("model-00007.params"), "x");
  WriteBytes(dir.File("model-abcd.params"), "x");
  absl::StatusOr<int> newest = checkpoint::NewestCompleteEpoch(prefix);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(*newest, 3);

  std::string bytes = ReadBytes(checkpoint::ParamsPath(prefix, 3));
  WriteBytes(checkpoint::ParamsPath(prefix, 3), bytes.substr(0, bytes.size() - 3));
  EXPECT_EQ(*checkpoint::NewestCompleteEpoch(prefix), 2);
}

TEST(NewestCompleteEpochTest, MissingDirectoryIsNotFound) {
  TempDir dir;
  EXPECT_EQ(checkpoint::NewestCompleteEpoch(dir.File("no/such/model")).status().code(), absl::StatusCode::kNotFound);
}

checkpoint::RunRecord SampleRun() {
  checkpoint::RunRecord r;
  r.run_id = "00c0ffee00c0ffee";
  r.network = "lenet";
  r.kv_store = "dist_sync";
  r.num_workers = 2;
  r.batch_size = 64;
  r.num_examples = 6000;
  r.seed = -7;
  return r;
}

TEST(RunRecordTest, RoundTripsInStatesVersion2) {
  TempDir dir;
  std::string path = dir.File("m.states");
  checkpoint::OptimizerStates in = SampleStates();
  in.run = SampleRun();
  ASSERT_TRUE(checkpoint::WriteStates(path, in).ok());
  EXPECT_EQ(ReadBytes(path).substr(8, 4), std::string("\x02\0\0\0", 4)) << "format version 2";
  absl::StatusOr<checkpoint::OptimizerStates> out = checkpoint::ReadStates(path);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->run.has_value());
  EXPECT_EQ(out->run->run_id, "00c0ffee00c0ffee");
  EXPECT_EQ(out->run->network, "lenet");
  EXPECT_EQ(out->run->kv_store, "dist_sync");
  EXPECT_EQ(out->run->num_workers, 2);
  EXPECT_EQ(out->run->batch_size, 64);
  EXPECT_EQ(out->run->num_examples, 6000);
  EXPECT_EQ(out->run->seed, -7);
  ASSERT_EQ(out->keys.size(), 3u);
  EXPECT_EQ(out->keys[0].optimizer_state, (std::vector<float>{1, 2, 3, 4}));
}

TEST(RunRecordTest, Version1FilesStillReadWithoutARecord) {
  TempDir dir;
  std::string path = dir.File("m.states");
  // A record-less write is byte for byte the version-1 format older builds wrote and read.
  ASSERT_TRUE(checkpoint::WriteStates(path, SampleStates()).ok());
  EXPECT_EQ(ReadBytes(path).substr(0, 12), std::string("DTRNSTA1\x01\0\0\0", 12));
  absl::StatusOr<checkpoint::OptimizerStates> out = checkpoint::ReadStates(path);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->run.has_value());
  EXPECT_EQ(out->keys.size(), 3u);
}

TEST(RunRecordTest, BadRecordsAreDataLossNamingTheField) {
  TempDir dir;
  std::string path = dir.File("m.states");
  checkpoint::OptimizerStates in = SampleStates();
  in.run = SampleRun();
  ASSERT_TRUE(checkpoint::WriteStates(path, in).ok());
  const std::string good = ReadBytes(path);
  const size_t at = good.find("\"batch_size\":64");
  ASSERT_NE(at, std::string::npos);
  std::string bytes = good;
  bytes.replace(at, 15, "\"batch_size\":\"\"");  // same length: 15 bytes
  FixCrc(&bytes);
  WriteBytes(path, bytes);
  absl::Status s = checkpoint::ReadStates(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("batch_size")));

  bytes = good;
  bytes[at] = '{';  // malformed JSON
  FixCrc(&bytes);
  WriteBytes(path, bytes);
  EXPECT_THAT(checkpoint::ReadStates(path).status().message(), HasSubstr("malformed run record"));

  // A record length past the file is refused before reading it.
  bytes = good;
  const size_t len_at = good.find('{') - 4;
  bytes[len_at + 3] = '\x7f';
  FixCrc(&bytes);
  WriteBytes(path, bytes);
  EXPECT_EQ(checkpoint::ReadStates(path).status().code(), absl::StatusCode::kDataLoss);

  // Versions this build does not know say so.
  bytes = good;
  bytes[8] = 3;
  FixCrc(&bytes);
  WriteBytes(path, bytes);
  EXPECT_THAT(checkpoint::ReadStates(path).status().message(), HasSubstr("reads 1 to 2"));
}

TEST(RunRecordTest, SymbolKeepsRunIdAndOldSymbolsHaveNone) {
  TempDir dir;
  std::string prefix = dir.File("m");
  ASSERT_TRUE(checkpoint::WriteSymbol(prefix, {"mlp", 10, {1, 28, 28}, {}, "abc"}).ok());
  EXPECT_EQ(checkpoint::ReadSymbol(prefix)->run_id, "abc");
  ASSERT_TRUE(checkpoint::WriteSymbol(prefix, {"mlp", 10, {1, 28, 28}, {}}).ok());
  EXPECT_EQ(ReadBytes(checkpoint::SymbolPath(prefix)).find("run_id"), std::string::npos);
  EXPECT_EQ(checkpoint::ReadSymbol(prefix)->run_id, "");
  EXPECT_NE(checkpoint::NewRunId(), checkpoint::NewRunId());
  EXPECT_EQ(checkpoint::NewRunId().size(), 16u);
}

// The mlp's widths travel in the symbol and the run record; files without them (older
// ones, and every lenet's) read back as empty: the network's default.
TEST(RunRecordTest, HiddenWidthsRoundTripAndAreOptional) {
  TempDir dir;
  std::string prefix = dir.File("m");
  ASSERT_TRUE(checkpoint::WriteSymbol(prefix, {"mlp", 10, {1, 28, 28}, {}, "abc", {2048, 2048}}).ok());
  EXPECT_THAT(ReadBytes(checkpoint::SymbolPath(prefix)), HasSubstr("\"hidden\""));
  EXPECT_EQ(checkpoint::ReadSymbol(prefix)->hidden, (std::vector<int64_t>{2048, 2048}));
  ASSERT_TRUE(checkpoint::WriteSymbol(prefix, {"lenet", 10, {1, 28, 28}, {}}).ok());
  EXPECT_EQ(ReadBytes(checkpoint::SymbolPath(prefix)).find("hidden"), std::string::npos);
  EXPECT_TRUE(checkpoint::ReadSymbol(prefix)->hidden.empty());

  const std::string path = checkpoint::SymbolPath(prefix);
  const std::string base = R"({"format":"dtrain-symbol-v1","network":"mlp","num_classes":10,"input_shape":[1,28,28],)"
                           R"("class_names":[],"hidden":)";
  for (const char* bad : {"[]", "[0]", "[2048,-1]", "[\"2048\"]", "2048", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]"}) {
    WriteBytes(path, base + bad + "}");
    absl::Status s = checkpoint::ReadSymbol(prefix).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr("\"hidden\""))) << bad;
  }

  std::string states = dir.File("m.states");
  checkpoint::OptimizerStates in = SampleStates();
  in.run = SampleRun();
  in.run->network = "mlp";
  in.run->hidden = {2048, 2048};
  ASSERT_TRUE(checkpoint::WriteStates(states, in).ok());
  EXPECT_EQ(checkpoint::ReadStates(states)->run->hidden, (std::vector<int64_t>{2048, 2048}));
  in.run = SampleRun();
  ASSERT_TRUE(checkpoint::WriteStates(states, in).ok());
  EXPECT_EQ(ReadBytes(states).find("hidden"), std::string::npos);
  EXPECT_TRUE(checkpoint::ReadStates(states)->run->hidden.empty());
}

TEST(CheckpointSetTest, ListsOnlyThePrefixsEpochFiles) {
  TempDir dir;
  std::string prefix = dir.File("model");
  EXPECT_TRUE(checkpoint::ListCheckpointFiles(dir.File("none/model"))->empty());
  for (const char* name : {"model-0002.params", "model-0002.states", "model-0010.states", "model-0001.params",
                           "model-symbol.json", "model-metrics.csv", "other-0003.params", "model-00004.params",
                           "model-0005.params.tmp.123", "model-abcd.params"}) {
    WriteBytes(dir.File(name), "x");
  }
  absl::StatusOr<std::vector<checkpoint::CheckpointFile>> files = checkpoint::ListCheckpointFiles(prefix);
  ASSERT_TRUE(files.ok()) << files.status();
  std::vector<std::string> got;
  for (const auto& f : *files) got.push_back(std::to_string(f.epoch) + " " + f.path);
  EXPECT_THAT(got, ElementsAre("1 " + dir.File("model-0001.params"), "2 " + dir.File("model-0002.params"),
                               "2 " + dir.File("model-0002.states"), "10 " + dir.File("model-0010.states")));
}

// The PID of a process that has exited and been reaped.
int DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  waitpid(pid, &status, 0);
  return pid;
}

TEST(CheckpointSetTest, SweepsTempFilesOfGoneWritersOnly) {
  TempDir dir;
  std::string prefix = dir.File("model");
  const std::string dead = std::to_string(DeadPid());
  const std::string live = std::to_string(getpid());
  for (const std::string& name :
       {"model-0003.params.tmp." + dead, "model-0003.states.tmp." + dead, "model-symbol.json.tmp." + dead,
        "model-metrics.csv.tmp." + dead, "model-0004.params.tmp." + live, "other-0001.params.tmp." + dead,
        std::string("model-0001.params")}) {
    WriteBytes(dir.File(name), "x");
  }
  absl::StatusOr<std::vector<std::string>> swept = checkpoint::SweepStaleTempFiles(prefix);
  ASSERT_TRUE(swept.ok()) << swept.status();
  EXPECT_EQ(swept->size(), 4u);
  EXPECT_THAT(dir.List(),
              ElementsAre("model-0001.params", "model-0004.params.tmp." + live, "other-0001.params.tmp." + dead));
}

}  // namespace
}  // namespace dtrain::checkpoint
