#include "services/worker/trainer_eval.h"

#include <algorithm>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "services/worker/epoch_reports.h"

namespace dtrain::worker {

EvalFigures Evaluate(models::Network& net, const TensorSet& set) {
  torch::NoGradGuard no_grad;
  net.eval();
  EvalFigures f;
  constexpr int64_t kChunk = 1000;
  for (int64_t i = 0; i < set.size(); i += kChunk) {
    const int64_t n = std::min(kChunk, set.size() - i);
    auto logits = net.forward(set.images.narrow(0, i, n));
    auto labels = set.labels.narrow(0, i, n);
    f.correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
    f.loss_sum +=
        torch::nn::functional::cross_entropy(logits.to(torch::kFloat64), labels,
                                             torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
            .item<double>();
  }
  f.count = set.size();
  net.train();
  return f;
}

absl::StatusOr<Validation> ValidateEpoch(models::Network& net, const TensorSet& part, Cluster& cluster, int64_t epoch,
                                         int64_t samples, double train_seconds, absl::Duration timeout, bool job_line) {
  const EvalFigures mine = Evaluate(net, part);
  EpochFigures report;
  report.epoch = epoch;
  report.samples = samples;
  report.train_seconds = train_seconds;
  report.eval_correct = mine.correct;
  report.eval_count = mine.count;
  report.eval_loss_sum = mine.loss_sum;
  cluster.ReportEpoch(report);
  absl::StatusOr<std::vector<EpochFigures>> all = cluster.GatherEpoch(epoch, timeout);
  if (!all.ok() && all.status().code() == absl::StatusCode::kAborted) return all.status();
  Validation v;
  if (!all.ok()) {
    DTRAIN_LOG(WARNING) << absl::StrFormat("Epoch[%d] validation over this worker's %d test images only: %s", epoch,
                                           mine.count, all.status().message());
    all = std::vector<EpochFigures>{report};
  } else {
    v.combined = true;
  }
  const CombinedEpoch c = Combine(*all);
  v.accuracy = c.validation_accuracy;
  v.cross_entropy = c.validation_cross_entropy;
  DTRAIN_LOG(INFO) << absl::StrFormat("Epoch[%d] Validation-accuracy=%f", epoch, v.accuracy);
  DTRAIN_LOG(INFO) << absl::StrFormat("Epoch[%d] Validation-cross-entropy=%f", epoch, v.cross_entropy);
  if (job_line && cluster.rank() == 0 && v.combined) {
    DTRAIN_LOG(INFO) << absl::StrFormat(
        "Epoch[%d] Job: %d worker%s\tSpeed: %.2f samples/sec\t%d samples\t%d test images", epoch, c.workers,
        c.workers == 1 ? "" : "s", c.samples_per_sec, c.samples, c.eval_count);
  }
  return v;
}

std::string ElasticEpochLine(int64_t epoch, int workers_at_end, int64_t samples, double train_seconds,
                             int64_t test_images) {
  return absl::StrFormat("Epoch[%d] Job: %d worker%s at its end\tSpeed: %.2f samples/sec\t%d samples\t%d test images",
                         epoch, workers_at_end, workers_at_end == 1 ? "" : "s",
                         train_seconds > 0 ? static_cast<double>(samples) / train_seconds : 0.0, samples, test_images);
}

}  // namespace dtrain::worker
