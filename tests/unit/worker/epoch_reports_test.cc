// The workers' epoch figures as GetStatus returns them, and how they combine.
#include "services/worker/epoch_reports.h"

#include "gtest/gtest.h"

namespace dtrain::worker {
namespace {

EpochFigures Figures(int64_t epoch, int64_t samples, double seconds, int64_t correct, int64_t count, double loss) {
  EpochFigures f;
  f.epoch = epoch;
  f.samples = samples;
  f.train_seconds = seconds;
  f.eval_correct = correct;
  f.eval_count = count;
  f.eval_loss_sum = loss;
  return f;
}

void AddWorker(v1::GetStatusResponse* s, int rank, const std::vector<EpochFigures>& reports) {
  v1::NodeInfo* n = s->add_nodes();
  n->set_role(v1::ROLE_WORKER);
  n->set_rank(rank);
  for (const EpochFigures& f : reports) *n->add_recent_epochs() = ToReport(f);
}

TEST(EpochReportsTest, FindsEveryWorkersReportOfTheEpochOrNamesWhoIsMissing) {
  v1::GetStatusResponse s;
  v1::NodeInfo* server = s.add_nodes();
  server->set_role(v1::ROLE_SERVER);
  server->set_rank(0);
  AddWorker(&s, 1, {Figures(2, 100, 1, 40, 50, 10), Figures(3, 100, 1, 45, 50, 9)});
  AddWorker(&s, 0, {Figures(3, 100, 2, 30, 50, 20)});
  std::vector<EpochFigures> all;
  std::vector<int> missing;
  ASSERT_TRUE(EpochReportsOf(s, 2, 3, &all, &missing));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].eval_correct, 30);
  EXPECT_EQ(all[1].eval_correct, 45);
  EXPECT_FALSE(EpochReportsOf(s, 2, 2, &all, &missing));
  EXPECT_EQ(missing, std::vector<int>{0});
  EXPECT_FALSE(EpochReportsOf(s, 3, 3, &all, &missing));
  EXPECT_EQ(missing, std::vector<int>{2});
}

TEST(EpochReportsTest, CombinesCountsNotRatios) {
  // Parts of 3334, 3333, 3333 images: the combined accuracy is all correct over all
  // images, as one worker evaluating the whole set gets.
  const CombinedEpoch c = Combine({Figures(0, 30000, 10, 3000, 3334, 1000.0), Figures(0, 30000, 20, 2000, 3333, 500.0),
                                   Figures(0, 0, 0, 3333, 3333, 0.0)});
  EXPECT_EQ(c.workers, 3);
  EXPECT_EQ(c.samples, 60000);
  EXPECT_EQ(c.eval_count, 10000);
  EXPECT_DOUBLE_EQ(c.validation_accuracy, 8333.0 / 10000.0);
  EXPECT_DOUBLE_EQ(c.validation_cross_entropy, 0.15);
  EXPECT_NEAR(c.samples_per_sec, 3000 + 1500, 1e-6);  // a worker without a training time adds nothing
}

}  // namespace
}  // namespace dtrain::worker
