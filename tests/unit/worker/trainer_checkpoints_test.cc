#include "services/worker/trainer_checkpoints.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::worker {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;
using testing::WriteBytes;

TrainOptions Options(const std::string& prefix, int64_t load_epoch) {
  TrainOptions o;
  o.model_prefix = prefix;
  o.load_epoch = load_epoch;
  o.mode = KVStoreMode::kDistSync;
  o.network = "lenet";
  return o;
}

TEST(CheckResumeMatchesTest, NamesEverySavedAndRequestedValueThatDiffers) {
  TrainOptions o = Options("m", 1);
  const checkpoint::RunRecord saved = RunRecordFor(o, 2, "r1");
  EXPECT_TRUE(CheckResumeMatches("m-0001.states", saved, RunRecordFor(o, 2, "")).ok());
  o.mode = KVStoreMode::kDistAsync;
  o.batch_size = 32;
  absl::Status s = CheckResumeMatches("m-0001.states", saved, RunRecordFor(o, 3, ""));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("m-0001.states"), HasSubstr("--kv-store dist_sync (saved) vs dist_async"),
                                 HasSubstr("--batch-size 64 (saved) vs 32"), HasSubstr("workers 2 (saved) vs 3"),
                                 Not(HasSubstr("--seed"))));
  // Files from before run records carry nothing to compare: accepted (with a warning).
  EXPECT_TRUE(CheckResumeMatches("m-0001.states", std::nullopt, RunRecordFor(o, 3, "")).ok());
}

TEST(CheckResumeMatchesTest, MlpWidthsMustMatchAndOldRecordsMeanTheDefault) {
  TrainOptions o = Options("m", 1);
  o.network = "mlp";
  o.hidden = "2048,2048";
  ASSERT_TRUE(FinishTrainFlags(&o, JobSpec{}).ok());
  const checkpoint::RunRecord wide = RunRecordFor(o, 2, "r1");
  EXPECT_EQ(wide.hidden, (std::vector<int64_t>{2048, 2048}));
  TrainOptions d = Options("m", 1);
  d.network = "mlp";
  ASSERT_TRUE(FinishTrainFlags(&d, JobSpec{}).ok());
  absl::Status s = CheckResumeMatches("m-0001.states", wide, RunRecordFor(d, 2, ""));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("--hidden 2048,2048 (saved) vs 128,64 (requested)"));
  // A record written before --hidden existed has no widths: its mlp was 128,64.
  checkpoint::RunRecord old = RunRecordFor(d, 2, "r0");
  old.hidden.clear();
  EXPECT_TRUE(CheckResumeMatches("m-0001.states", old, RunRecordFor(d, 2, "")).ok());
  EXPECT_FALSE(CheckResumeMatches("m-0001.states", old, RunRecordFor(o, 2, "")).ok());
}

TEST(PrepareCheckpointPrefixTest, FreshStartOnAUsedPrefixIsRefusedUnlessOverwriting) {
  TempDir dir;
  const std::string prefix = dir.File("m");
  EXPECT_TRUE(PrepareCheckpointPrefix(Options(dir.File("new/m"), 0)).ok()) << "no directory yet";
  EXPECT_TRUE(PrepareCheckpointPrefix(Options(prefix, 0)).ok()) << "empty directory";
  for (const char* name : {"m-0001.params", "m-0001.states", "m-0005.params", "m-symbol.json", "m-metrics.csv"}) {
    WriteBytes(dir.File(name), "x");
  }
  absl::Status s = PrepareCheckpointPrefix(Options(prefix, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(dir.File("m-0001.params")), HasSubstr(dir.File("m-0005.params")),
                                 HasSubstr("--load-epoch 5"), HasSubstr("--overwrite-checkpoints")));
  EXPECT_EQ(dir.List().size(), 5u) << "a refusal deletes nothing";

  TrainOptions o = Options(prefix, 0);
  o.overwrite_checkpoints = true;
  ASSERT_TRUE(PrepareCheckpointPrefix(o).ok());
  EXPECT_THAT(dir.List(), ElementsAre("m-symbol.json"));
}

TEST(PrepareCheckpointPrefixTest, ResumeBeforeLaterEpochsIsRefusedUnlessOverwriting) {
  TempDir dir;
  const std::string prefix = dir.File("m");
  for (const char* name : {"m-0001.params", "m-0001.states", "m-0002.params", "m-0002.states", "m-metrics.csv"}) {
    WriteBytes(dir.File(name), "x");
  }
  EXPECT_TRUE(PrepareCheckpointPrefix(Options(prefix, 2)).ok()) << "resuming the newest epoch";
  absl::Status s = PrepareCheckpointPrefix(Options(prefix, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(dir.File("m-0002.params")), HasSubstr(dir.File("m-0002.states")),
                                 Not(HasSubstr("m-0001")), HasSubstr("--overwrite-checkpoints")));
  TrainOptions o = Options(prefix, 1);
  o.overwrite_checkpoints = true;
  ASSERT_TRUE(PrepareCheckpointPrefix(o).ok());
  EXPECT_THAT(dir.List(), ElementsAre("m-0001.params", "m-0001.states", "m-metrics.csv"));
}

}  // namespace
}  // namespace dtrain::worker
