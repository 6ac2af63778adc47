// PREFIX-metrics.csv: appended per epoch, read back by `dtrain plot`.
#include "common/metrics/metrics_csv.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/unit/common/temp_dir.h"

namespace dtrain::metrics {
namespace {

// A path in a directory of this test program's own, removed when it exits.
std::string TempPath(const std::string& name) {
  static const dtrain::testing::TempDir dir;
  const std::string path = dir.File(name);
  std::remove(path.c_str());
  return path;
}

EpochFigures Row(int64_t epoch, double loss) {
  EpochFigures r;
  r.epoch = epoch;
  r.samples = 30000;
  r.time_cost_s = 12.5;
  r.samples_per_sec = 2400;
  r.train_loss = loss;
  r.train_accuracy = 0.8;
  r.validation_accuracy = 0.85;
  r.workers = 2;
  r.unix_time = 1700000000;
  return r;
}

TEST(MetricsCsvTest, AppendsWithOneHeaderAndReadsBackTheLastRowPerEpoch) {
  const std::string path = TempPath("a-metrics.csv");
  ASSERT_TRUE(AppendEpochFigures(path, Row(0, 0.9)).ok());
  ASSERT_TRUE(AppendEpochFigures(path, Row(1, 0.5)).ok());
  ASSERT_TRUE(AppendEpochFigures(path, Row(1, 0.4)).ok());  // a resumed run redid epoch 1
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, EpochFiguresHeader());
  int lines = 0;
  while (std::getline(in, line)) {
    EXPECT_NE(line, header);
    ++lines;
  }
  EXPECT_EQ(lines, 3);
  auto rows = ReadEpochFigures(path);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].epoch, 0);
  EXPECT_DOUBLE_EQ((*rows)[1].train_loss, 0.4);
  EXPECT_EQ((*rows)[1].workers, 2);
  EXPECT_EQ(MetricsCsvPath("model/m"), "model/m-metrics.csv");
}

TEST(MetricsCsvTest, ErrorsNameTheFileAndLine) {
  EXPECT_EQ(ReadEpochFigures(TempPath("missing.csv")).status().code(), absl::StatusCode::kNotFound);
  const std::string path = TempPath("bad-metrics.csv");
  std::ofstream(path) << EpochFiguresHeader() << "\n0,1,2,3,4,5,6,7,8\n1,x,2,3,4,5,6,7,8\n";
  auto rows = ReadEpochFigures(path);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(std::string(rows.status().message()).find(path + ":3"), std::string::npos) << rows.status();
  std::ofstream(path) << "epoch,loss\n";
  EXPECT_NE(std::string(ReadEpochFigures(path).status().message()).find("header"), std::string::npos);
}

}  // namespace
}  // namespace dtrain::metrics
