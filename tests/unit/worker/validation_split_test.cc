// W workers evaluating their parts of the test set (EvalPart) and combining
// the counts (Combine) get exactly the accuracy of one worker evaluating all of it,
// whatever W and however the set size divides; the cross-entropy to rounding.
// Evaluation leaves weights and the random stream untouched.
#include <cstring>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "services/worker/dataset.h"
#include "services/worker/epoch_reports.h"
#include "services/worker/trainer_eval.h"

namespace dtrain::worker {
namespace {

// 1003 images of 28x28 with labels the network gets right more often than chance:
// each class's images share a bright patch at a place of their own.
TensorSet TestImages() {
  torch::manual_seed(7);
  const int64_t n = 1003;
  TensorSet t;
  t.labels = torch::randint(0, 10, {n}, torch::kInt64);
  t.images = torch::rand({n, 1, 28, 28}) * 0.3;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = t.labels[i].item<int64_t>();
    t.images[i][0].narrow(0, 2 * c, 4).narrow(1, 2 * c, 4).fill_(1.0);
  }
  return t;
}

std::vector<float> Weights(models::Network& net) {
  std::vector<float> out;
  for (const auto& p : net.parameters()) {
    torch::Tensor t = p.detach().contiguous();
    out.insert(out.end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  return out;
}

TEST(ValidationSplitTest, CombinedPartsEqualTheWholeSet) {
  torch::manual_seed(42);
  auto net = models::CreateNetwork("lenet", 10);
  ASSERT_TRUE(net.ok()) << net.status();
  // A few steps of training so that the accuracy is neither 0 nor chance.
  const TensorSet test = TestImages();
  torch::optim::SGD sgd((*net)->parameters(), torch::optim::SGDOptions(0.1));
  for (int step = 0; step < 20; ++step) {
    auto idx = torch::arange(step * 50, step * 50 + 50) % test.size();
    sgd.zero_grad();
    torch::nn::functional::cross_entropy((*net)->forward(test.images.index_select(0, idx)),
                                         test.labels.index_select(0, idx))
        .backward();
    sgd.step();
  }
  const std::vector<float> before = Weights(**net);

  const EvalFigures whole = Evaluate(**net, test);
  EXPECT_EQ(whole.count, 1003);
  EXPECT_GT(whole.correct, 150) << "trained past chance";
  const double whole_accuracy = static_cast<double>(whole.correct) / static_cast<double>(whole.count);
  for (int workers : {1, 2, 3, 4, 7}) {
    std::vector<EpochFigures> parts;
    int64_t covered = 0;
    for (int rank = 0; rank < workers; ++rank) {
      const TensorSet part = EvalPart(test, rank, workers);
      EXPECT_LE(part.size() - test.size() / workers, 1) << "parts differ by at most one image";
      covered += part.size();
      const EvalFigures f = Evaluate(**net, part);
      EpochFigures e;
      e.eval_correct = f.correct;
      e.eval_count = f.count;
      e.eval_loss_sum = f.loss_sum;
      parts.push_back(e);
    }
    EXPECT_EQ(covered, test.size()) << workers;
    const CombinedEpoch c = Combine(parts);
    EXPECT_EQ(c.eval_count, whole.count) << workers;
    EXPECT_EQ(c.validation_accuracy, whole_accuracy) << workers << " workers";
    EXPECT_NEAR(c.validation_cross_entropy, whole.loss_sum / whole.count, 1e-9) << workers << " workers";
  }
  // Nothing training uses was touched: weights, and the random stream.
  EXPECT_EQ(Weights(**net), before);
  torch::manual_seed(99);
  const torch::Tensor a = torch::rand({4});
  torch::manual_seed(99);
  Evaluate(**net, test);
  EXPECT_TRUE(torch::equal(a, torch::rand({4}))) << "evaluation drew random numbers";
}

TEST(ValidationSplitTest, PartsAreContiguousAndInOrder) {
  const TensorSet test = TestImages();
  const TensorSet p1 = EvalPart(test, 1, 3);
  EXPECT_EQ(p1.size(), 334);  // [334, 668)
  EXPECT_TRUE(torch::equal(p1.labels, test.labels.narrow(0, 334, 334)));
  EXPECT_EQ(EvalPart(test, 2, 3).size(), 335);
}

}  // namespace
}  // namespace dtrain::worker
